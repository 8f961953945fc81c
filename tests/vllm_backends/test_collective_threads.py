"""The collective-call rule with two simulated ranks (threads) and a stand-in of TRL's server mode.

The stand-in does what TRL 1.16's ``VLLMGeneration.generate`` does in server mode: gather
every rank's prompts, generate on rank 0, broadcast, and hand rank ``r`` the slice
``[r * len(prompts), (r + 1) * len(prompts))``. Its "server" answers deterministically from
the prompt, so each sampled turn can be checked against its own context. Needs no vLLM
(``test_server.py`` runs the real TRL code in two real processes).
"""

from __future__ import annotations

import copy
import threading
import zlib
from types import SimpleNamespace

import pytest
import torch
from vllm_helpers import CountdownEnv

from trl_env import ChatTemplateProcessor, rollout
from trl_env.generation.trainer_vllm import TrainerVLLMGenerator
from trl_env.trainer.trl_compat import vllm_generate_tokens

SEEDS = [["1-a", "1-b"], ["3-a", "2-b", "3-c"]]


class Group:
    """Two ranks exchanging Python objects through a barrier (all-gather)."""

    def __init__(self, size: int) -> None:
        self.size, self.barrier, self.slots = size, threading.Barrier(size, timeout=30), [None] * size

    def all_gather(self, rank: int, value):
        self.barrier.wait()
        self.slots[rank] = value
        self.barrier.wait()
        gathered = list(self.slots)
        self.barrier.wait()
        return gathered


class FakeAccelerator:
    def __init__(self, group: Group, rank: int) -> None:
        self.group, self.process_index, self.num_processes, self.device = group, rank, group.size, "cpu"

    def reduce(self, tensor: torch.Tensor, reduction: str) -> torch.Tensor:
        assert reduction == "max"
        return torch.stack(self.group.all_gather(self.process_index, tensor)).max(dim=0).values


def fake_completion(prompt: list[int], max_tokens: int, stop: list[int]) -> tuple[list[int], list[float]]:
    """The stand-in server's deterministic answer: a hash-driven run of ordinary tokens, maybe a stop."""
    h = zlib.crc32(str(prompt).encode())
    length = 1 + h % (max_tokens + 3)
    ids = [1000 + (h >> 3) % 4000 + k for k in range(min(length, max_tokens))]
    if length <= max_tokens:
        ids[-1] = stop[0]
    return ids, [-((h + k) % 97) / 40 for k in range(len(ids))]


class FakeServerHandle:
    """TRL 1.16 server-mode ``generate`` semantics: gather, generate on rank 0, broadcast, slice."""

    mode, tensor_parallel_size = "server", 1

    def __init__(self, group: Group, rank: int) -> None:
        self.group, self.rank, self.generation_kwargs, self.seen = group, rank, {}, []

    def generate(self, prompts, images, num_generations):
        everyone = [p for ps in self.group.all_gather(self.rank, list(prompts)) for p in ps]
        answer = None
        if self.rank == 0:
            kwargs = self.generation_kwargs
            if not everyone:
                raise ValueError("the server rejects an empty prompt list")
            answer = [fake_completion(p, kwargs["max_tokens"], kwargs["stop_token_ids"]) for p in everyone]
        answer = self.group.all_gather(self.rank, answer)[0]
        self.seen.append({**self.generation_kwargs, "prompts": everyone})
        mine = slice(self.rank * len(prompts), (self.rank + 1) * len(prompts))
        return everyone[mine], [a[0] for a in answer[mine]], [[[lp] for lp in a[1]] for a in answer[mine]], None


class NoPadding(TrainerVLLMGenerator):
    """The naive version: sends only its own contexts (possibly none)."""

    def generate(self, contexts, max_new_tokens):
        ids, logprobs = vllm_generate_tokens(
            self.handle, contexts, max_tokens=max_new_tokens, stop_token_ids=self.stop_token_ids
        )
        return list(zip(ids, logprobs, strict=True))


def play(generator_class, tokenizer, schedule="turn"):
    group, results, errors = Group(2), [None, None], []
    # One tokenizer per rank, as in real processes: a fast tokenizer is not safe to share across threads.
    tokenizers = [copy.deepcopy(tokenizer) for _ in range(2)]
    processors = [ChatTemplateProcessor(t) for t in tokenizers]

    def run(rank: int) -> None:
        handle = FakeServerHandle(group, rank)
        trainer = SimpleNamespace(eos_token_ids=[tokenizer.eos_token_id])
        generator = generator_class(trainer, accelerator=FakeAccelerator(group, rank), handle=handle)
        try:
            episodes = rollout(
                CountdownEnv,
                SEEDS[rank],
                generator,
                processors[rank],
                tokenizer=tokenizers[rank],
                max_turns=4,
                max_turn_tokens=6,
                max_completion_tokens=400,
                schedule=schedule,
                env_isolation="thread",
            )
            results[rank] = (episodes, generator, handle)
        except Exception as error:
            errors.append(error)
            group.barrier.abort()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a rank hung"
    return results, errors


@pytest.mark.parametrize("schedule", ["turn", "episode"])
def test_ranks_call_generate_in_step_and_get_their_own_completions(qwen3_tokenizer, schedule):
    results, errors = play(TrainerVLLMGenerator, qwen3_tokenizer, schedule)
    assert not errors, errors
    (episodes0, generator0, handle0), (episodes1, generator1, handle1) = results
    assert [e.num_turns for e in episodes0] == [1, 1] and [e.num_turns for e in episodes1] == [3, 2, 3]
    if schedule == "turn":
        assert generator0.calls == generator1.calls == 3
    assert generator0.calls == generator1.calls
    assert handle0.seen == handle1.seen, "every rank sends the same max_tokens and stop ids"
    stop = [qwen3_tokenizer.eos_token_id]
    for episode, handle in [(e, handle0) for e in episodes0] + [(e, handle1) for e in episodes1]:
        for segment in episode.segments:
            if not segment.from_model:
                continue
            context = episode.prompt_ids + episode.completion_ids[: segment.start]
            (call,) = [call for call in handle.seen if context in call["prompts"]]
            expected, _ = fake_completion(context, call["max_tokens"], stop)
            assert episode.completion_ids[segment.start : segment.end] == expected[: segment.end - segment.start]


def test_without_padding_ranks_get_other_ranks_completions(qwen3_tokenizer):
    _, errors = play(NoPadding, qwen3_tokenizer)
    assert any(isinstance(e, RuntimeError) and "other prompts" in str(e) for e in errors), errors


def test_single_process_needs_no_collective():
    handle = SimpleNamespace(mode="server", tensor_parallel_size=1, generation_kwargs={})
    trainer = SimpleNamespace(eos_token_ids=[2], accelerator=SimpleNamespace(num_processes=1), vllm_generation=handle)
    generator = TrainerVLLMGenerator(trainer)
    assert not generator.collective and generator.any_rank_live(False) is False
    assert generator.generate([], 4) == [] and generator.calls == 0

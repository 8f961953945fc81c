"""TextArena through trl-env: Tic Tac Toe against a fixed opponent policy.

The model plays one seat; ``opponent`` (any ``str -> str`` callable, here one that always takes
the first free cell) plays the other. Training with it::

    factory = textarena_env("TicTacToe-v0", opponent=first_free_cell)
    rollout_func = make_rollout_func(factory, ...)

and from the command line (the opponent named as ``module:function``, or ``"random"`` for the built-in
random legal-move opponent)::

    trl-env train --env trl_env.adapters.textarena:textarena_env --env-kwargs \\
        '{"game_id": "TicTacToe-v0", "opponent": "examples.adapters.textarena_example:first_free_cell"}' ...

Example:
    >>> transcript = main()
    >>> print(transcript[-1])
    reward 1.0, metrics {'steps': 3.0, 'truncated': 0.0, 'invalid_move': 0.0, 'success': 1.0}
"""

from __future__ import annotations

import re

from trl_env.adapters.textarena import textarena_env


def first_free_cell(observation: str) -> str:
    """An opponent policy: the lowest-numbered move the board lists as available.

    Example:
        >>> first_free_cell("Available Moves: '[2]', '[5]'")
        '[2]'
    """
    moves = re.findall(r"'\[(\d+)\]'", observation)
    return f"[{min(moves, key=int)}]" if moves else "[0]"


def main(verbose: bool = False) -> list[str]:
    """The model (Player 0) plays the middle column against :func:`first_free_cell`; return the transcript."""
    env, delta = textarena_env("TicTacToe-v0", opponent=first_free_cell)().reset("0")
    lines = [f"env: {delta}"]
    for move in ("[4]", "[1]", "[7]"):
        env, delta = env.step(move)
        lines += [f"model: {move}", f"env: {delta}"]
        if not env.alive:
            break
    lines.append(f"reward {env.reward}, metrics {env.metrics()}")
    if verbose:
        print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(verbose=True)

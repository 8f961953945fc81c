"""TextWorld through trl-env: a locally generated text adventure, won by its walkthrough.

The first episode of a game compiles it (about 3 s, with the Inform 7 compiler inside the
``textworld`` wheel) into the game cache; later episodes reuse it. Training with it::

    factory = textworld_env(world_size=3, quest_length=3, num_games=64, admissible_commands=True)
    rollout_func = make_rollout_func(factory, ...)

and from the command line::

    trl-env train --env trl_env.adapters.textworld:textworld_env --env-kwargs '{"num_games": 64}' ...

Example:
    >>> import tempfile
    >>> print(main(cache_dir=tempfile.mkdtemp())[-1])
    reward 1.0, success 1.0
"""

from __future__ import annotations

import textworld

from trl_env.adapters.textworld import game_file, textworld_env


def main(cache_dir: str | None = None, verbose: bool = False) -> list[str]:
    """Play game 0 of the default pool with its walkthrough; return the transcript."""
    options = {"nb_rooms": 3, "nb_objects": 5, "quest_length": 3}
    factory = textworld_env(world_size=3, nb_objects=5, quest_length=3, cache_dir=cache_dir)
    env, delta = factory().reset("train-0")
    lines = [f"env: {delta}"]
    # the walkthrough comes from TextWorld itself (a cheat sheet, for the demo)
    cheat = textworld.start(str(game_file(options, 0, cache_dir)), textworld.EnvInfos(extras=["walkthrough"]))
    commands = cheat.reset()["extra.walkthrough"]
    cheat.close()
    for command in commands:
        env, delta = env.step(command)
        lines += [f"model: {command}", f"env: {delta}"]
    lines.append(f"reward {env.reward}, success {env.metrics()['success']}")
    if verbose:
        print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(verbose=True)

"""Adapters that turn existing environment packages into trl-env environments.

Each adapter is a function whose keyword arguments are the environment's options and which
returns an env *factory*: a zero-argument, picklable callable (a ``functools.partial`` of a
module-level class) that builds a fresh env. Use it with ``make_rollout_func(factory, ...)`` or
``rollout(factory, ...)``, or from the command line, where the function's keyword arguments
are ``--env-kwargs``::

    trl-env eval --env trl_env.adapters.textarena:textarena_env \\
        --env-kwargs '{"game_id": "TicTacToe-v0", "opponent": "random"}' --model DIR

* :mod:`trl_env.adapters.reasoning_gym`: ``reasoning_gym_env(dataset, ...)``, a question and
  up to ``max_tries`` answers, scored by the dataset (``pip install reasoning-gym``).
* :mod:`trl_env.adapters.textarena`: ``textarena_env(game_id, opponent=..., ...)``, TextArena
  games, two-player ones against a fixed opponent policy (``"random"``: a random legal move)
  (``pip install textarena``).
* :mod:`trl_env.adapters.textworld`: ``textworld_env(...)``, text adventures generated and
  compiled locally with TextWorld's own tools (``pip install textworld``).
* :mod:`trl_env.adapters.openenv`: ``openenv_env(base_url, ...)``, a client of a running
  OpenEnv server (``pip install openenv-core``).

All four install with ``pip install trl-env[adapters]``. Seeds are strings; the same seed
gives the same episode (see :func:`trl_env.adapters.seeds.seed_index`). Each env also has
``metrics() -> dict[str, float]`` and ``close()``; ``metrics()["success"]`` (1.0 or 0.0) is the
environment's own verdict where it has one (what :func:`trl_env.evaluate` counts), never a reward
threshold. Actions are cleaned of control characters and lone surrogates first
(:mod:`trl_env.adapters.actions`).

Importing this package imports none of the ecosystems; each module imports its own.

Example:
    >>> import trl_env.adapters
    >>> sorted(trl_env.adapters.ADAPTERS)
    ['openenv', 'reasoning_gym', 'textarena', 'textworld']
"""

ADAPTERS = {
    "openenv": "trl_env.adapters.openenv:openenv_env",
    "reasoning_gym": "trl_env.adapters.reasoning_gym:reasoning_gym_env",
    "textarena": "trl_env.adapters.textarena:textarena_env",
    "textworld": "trl_env.adapters.textworld:textworld_env",
}

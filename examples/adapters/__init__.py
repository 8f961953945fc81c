"""Examples of the environment-package adapters in :mod:`trl_env.adapters`, one per ecosystem.

Run one from the repository root, e.g. ``python -m examples.adapters.textarena_example``. Each
plays a scripted episode through the adapter and prints it; the module docstrings show the
same factory in ``make_rollout_func`` and on the command line.
"""

"""Example environments for trl-env.

Each subpackage holds one environment that follows :class:`trl_env.core.Env`; import it as
``examples.<name>:<Class>`` from the repository root, e.g. ``examples.guess_number:GuessNumberEnv``.

* ``guess_number``: guess a secret integer from higher/lower hints (shaped reward).
* ``wordle``: five-letter Wordle with a small built-in word list.
* ``discrete_log``: solve ``g^x = h (mod p)``, optionally running Python in a sandbox.
"""

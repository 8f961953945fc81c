"""The command line's own error: a mistake in what was typed, printed as one line with exit status 2.

Example:
    >>> isinstance(UsageError("--max-turns must be >= 1"), TrlEnvError)
    True
"""

from __future__ import annotations

from trl_env.errors import TrlEnvError


class UsageError(TrlEnvError):
    """A command-line mistake: printed as one line, exit status 2."""

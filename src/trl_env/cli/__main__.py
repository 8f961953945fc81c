"""``python -m trl_env.cli``: the same as the ``trl-env`` command."""

from trl_env.cli import main

raise SystemExit(main())

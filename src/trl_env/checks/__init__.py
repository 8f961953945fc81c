"""Startup checks: a chat format (additivity, template equality, tool turns) and an environment (``check_env``)."""

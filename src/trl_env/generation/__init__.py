"""Sampling backends (the :class:`~trl_env.core.Generator` protocol): transformers, kv-cache, vLLM, OpenAI server."""

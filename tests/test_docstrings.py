"""The runnable examples in the core modules' docstrings run and are right."""

import doctest
import importlib

import pytest

MODULES = ["core", "generator", "chat_chunks", "chunked_processor", "presets", "parsing", "episode", "env_calls",
           "env_checker", "additivity", "trl_compat", "trl_glue", "imports", "testing.instant_generator"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"trl_env.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

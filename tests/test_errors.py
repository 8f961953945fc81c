"""One exception family: every exception trl-env raises on purpose is a ``TrlEnvError`` with its builtin base."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import trl_env
from tests.engine.hostile_envs import Hostile
from trl_env.chat.presets import preset
from trl_env.engine.config import RolloutConfig
from trl_env.envpool.pool import EnvPool
from trl_env.envpool.replies import EnvContractError
from trl_env.errors import ConfigError, ConfigTypeError, TrlEnvError

SRC = Path(trl_env.__file__).parent
# every module of the package (``cli.__main__`` runs the command line when imported)
MODULES = sorted(m.name for m in pkgutil.walk_packages(trl_env.__path__, "trl_env.") if not m.name.endswith("__main__"))
BUILTIN_ERRORS = {name for name, obj in vars(builtins).items() if inspect.isclass(obj) and issubclass(obj, Exception)}
# raises of a bare builtin that stay, and why
KEPT_BUILTIN_RAISES = {
    ("__init__.py", "AttributeError"),  # module __getattr__: Python's protocol for "no such attribute"
    ("adapters/trl_environment.py", "ValueError"),  # caught on the next lines and answered to the model, as TRL does
    ("adapters/textarena_opponents.py", "NotImplementedError"),  # an abstract method of LegalMovePolicy
}


def test_the_walk_finds_every_module_and_the_known_classes():
    assert len(MODULES) > 60 and {"trl_env.errors", "trl_env.envpool.replies", "trl_env.cli.arguments"} <= set(MODULES)
    assert trl_env.TrlEnvError is TrlEnvError and "TrlEnvError" in dir(trl_env)


@pytest.mark.parametrize("module_name", MODULES)
def test_every_exception_class_is_a_trl_env_error(module_name):
    module = importlib.import_module(module_name)
    classes = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and not issubclass(obj, Warning)  # warnings are not raised: the family is for errors
        and obj.__module__ == module_name
    ]
    strays = [cls.__qualname__ for cls in classes if not issubclass(cls, TrlEnvError)]
    assert not strays, f"{module_name}: {strays} must derive from trl_env.errors.TrlEnvError (keep the builtin base)"


def test_no_bare_builtin_is_raised_on_purpose():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(target, ast.Name) and target.id in BUILTIN_ERRORS:
                    found.append((path.relative_to(SRC).as_posix(), target.id, node.lineno))
    stray = [f"{path}:{line} raises {name}" for path, name, line in found if (path, name) not in KEPT_BUILTIN_RAISES]
    assert not stray, "use a trl_env.errors family (e.g. ConfigError for a bad value): " + "; ".join(stray)
    assert {(path, name) for path, name, _ in found} == KEPT_BUILTIN_RAISES  # the allow-list holds no stale entry


def test_the_errors_module_needs_neither_torch_nor_the_rest_of_trl_env():
    tree = ast.parse((SRC / "errors.py").read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported == ["__future__"]
    code = "import sys, trl_env.errors; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_bad_rollout_setting_is_caught_as_a_trl_env_error_and_still_a_value_or_type_error():
    with pytest.raises(TrlEnvError, match="RolloutConfig.max_turns must be >= 1") as caught:
        RolloutConfig(max_turns=0)
    assert caught.type is ConfigError and isinstance(caught.value, ValueError)
    with pytest.raises(TrlEnvError, match="unknown rollout setting 'max_turn'") as caught:
        RolloutConfig.from_kwargs(max_turn=3)
    assert caught.type is ConfigTypeError and isinstance(caught.value, TypeError)


def test_an_unknown_preset_is_caught_as_a_trl_env_error():
    with pytest.raises(TrlEnvError, match="unknown preset 'nope'; known presets: ") as caught:
        preset("nope")
    assert isinstance(caught.value, ValueError)


def test_an_env_contract_error_is_caught_as_a_trl_env_error():
    with EnvPool(Hostile, isolation="thread", workers=1) as pool:
        slot, _ = pool.reset("s1")
        with pytest.raises(TrlEnvError, match=r"Hostile.step\(seed='s1'\) returned a 2-tuple whose delta") as caught:
            pool.step(slot, "delta:int").result()
    assert caught.type is EnvContractError and isinstance(caught.value, TypeError)

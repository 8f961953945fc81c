"""Import a script of ``experiments/`` (not a package) as a module, for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` imported as the module ``name`` (registered, so dataclasses find it)."""
    folder = str(ROOT / "experiments")
    if folder not in sys.path:  # as when the script runs: its siblings (demo_runs) import by name
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

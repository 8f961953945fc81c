#!/usr/bin/env bash
# The TRL-facing tests against the oldest supported TRL (1.15), in a venv of their own (no vLLM).
# Usage: bash scripts/test_trl_1_15.sh [VENV_DIR]   (make test-trl-1.15 runs it)
set -euo pipefail
venv=${1:-.venv-trl115}
if [ ! -f "$venv/.installed" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "torch==2.13.0"
  "$venv/bin/pip" install --quiet -e ".[dev]" "trl==1.15.*"
  touch "$venv/.installed"
fi
"$venv/bin/python" -c "import trl; assert trl.__version__.startswith('1.15'), trl.__version__; print('trl', trl.__version__)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_grpo_end_to_end.py tests/test_gradient_isolation.py \
  tests/test_env_failures_training.py tests/trainer tests/test_readme.py::test_readme_example_runs \
  src/trl_env/trainer src/trl_env/cli/train.py

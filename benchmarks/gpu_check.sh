#!/usr/bin/env bash
# Fills in the GPU presets' real figures (issue 20 §6; docs/gpu.md): one
# member of each paper config trained for a few steps under its preset
# (bf16, XLA, batch), tokens/s or examples/s beside the expected figure.
#
#   bash benchmarks/gpu_check.sh                 # GPU machine, ~3 minutes
#   bash benchmarks/gpu_check.sh --require-gpu   # exit 2 if JAX sees no GPU
#   bash benchmarks/gpu_check.sh --tiny          # toy sizes, any machine
#   bash benchmarks/gpu_check.sh --cpu-baseline  # the expected column (CPU)
#
# JAX backend only: a GPU machine may have JAX with CUDA and no TensorFlow.
# Needs keras, numpy, pyyaml, scikit-learn and JAX; the project itself is
# read from this checkout (no install). Python: $PYTHON, else .venv's, else
# python3. Other arguments go to benchmarks/gpu_check.py (--steps, --configs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
if ! "$python" -c "import jax, keras, yaml, sklearn" 2>/dev/null; then
  echo "gpu_check: $python lacks one of jax, keras, pyyaml, scikit-learn." \
       "Install them (pip install keras pyyaml scikit-learn 'jax[cuda13]')," \
       "or set PYTHON to an interpreter that has them." >&2
  exit 2
fi
export KERAS_BACKEND=jax
export PYTHONPATH="$root:$root/service${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" "$root/benchmarks/gpu_check.py" "$@"

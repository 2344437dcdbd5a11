#!/usr/bin/env bash
# Fills in the GPU presets' real figures (issue 20 §6; docs/gpu.md): one
# member of each paper config trained for a few steps under its preset
# (bf16, XLA, batch), tokens/s or examples/s beside the expected figure.
#
#   bash benchmarks/gpu_check.sh                 # GPU machine, ~3 minutes
#   bash benchmarks/gpu_check.sh --require-gpu   # exit 2 if JAX sees no GPU
#   bash benchmarks/gpu_check.sh --tiny          # toy sizes, any machine
#   bash benchmarks/gpu_check.sh --cpu-baseline  # the expected column (CPU)
#   bash benchmarks/gpu_check.sh --ray           # issue 33 §4: two Ray groups, one GPU
#
# --ray (needs the service and Ray: pip install -e ".[service,ray]"): kg-train
# --engine ray on a local Ray, the moons sweep's 20 members as 2 tasks of 10
# (execution.members_per_task) that each ask half a GPU
# (execution.group_resources.num_gpus 0.5), so both train at once on one
# GPU, under the mixed-precision preset (device.mixed_precision
# mixed_bfloat16, device.type gpu); TensorFlow grows its GPU memory instead
# of taking it whole in each task. It prints each member run's node and
# device. Further arguments go to kg-train (--dry-run checks the settings
# on any machine). Not yet run on a GPU (none lent so far).
#
# JAX backend only: a GPU machine may have JAX with CUDA and no TensorFlow.
# Needs keras, numpy, pyyaml, scikit-learn and JAX; the project itself is
# read from this checkout (no install). Python: $PYTHON, else .venv's, else
# python3. Other arguments go to benchmarks/gpu_check.py (--steps, --configs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${1:-}" == "--ray" ]]; then
  shift
  work=$(mktemp -d)
  bin="${PYTHON:+$(dirname "$PYTHON")}"
  bin="${bin:-$root/.venv/bin}"
  TF_FORCE_GPU_ALLOW_GROWTH=true KERAS_BACKEND=tensorflow "$bin/kg-train" \
    --config "$root/configs/moons.yaml" --engine ray \
    --tracking-uri "sqlite:///$work/mlflow.db" --output-dir "$work" \
    --set seeds=10 --set execution.members_per_task=10 \
    --set execution.group_resources.num_gpus=0.5 --set execution.group_resources.num_cpus=1 \
    --set device.type=gpu --set device.mixed_precision=mixed_bfloat16 \
    --set export.tolerance=3e-2 --set registry.enabled=false "$@"
  [[ -f "$work/mlflow.db" ]] || { rm -rf "$work"; exit 0; }  # --dry-run
  "$bin/python" - "$work/mlflow.db" <<'PY'
import sys, mlflow
client = mlflow.MlflowClient(f"sqlite:///{sys.argv[1]}")
(experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
for run in client.search_runs([experiment.experiment_id], "tags.`kg.role` = 'member'"):
    tags = run.data.tags
    print(run.info.run_name, tags.get("kg.node", "")[:12], tags.get("device.device"),
          tags.get("device.device_name"), tags.get("device.mixed_precision"))
PY
  exit 0
fi
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

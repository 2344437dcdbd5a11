#!/usr/bin/env bash
# From nothing to docs/results.md: trains every study of the page into one
# MLflow store, then renders the page from that store alone.
#
#   bash docs/make_results.sh                     # store: results-store/mlflow.db
#   bash docs/make_results.sh /tmp/store          # another store folder
#   bash docs/make_results.sh results-store glu   # only some parts, no page:
#       revival_ln revival_noln slope glu digits (revival = both halves;
#       train_all = every part, as `kg results --run` calls it)
#
# The parts run side by side (one process each, the GLU sweep as 4 shards
# of one sweep): on a busy shared CPU each process gets its share, so
# side by side they finish in about the time of the longest, not the sum.
# Each sweep is a shipped config (its `study:` tag is how `kg results`
# finds it) with the seeds the page uses: the most the ~30 min budget per
# study allowed on the shared 2-core CPU, stated beside each (the seed
# plans of the last page asked for 4 (GEGLU, GELU vs ReLU) to 91 (Swish)
# seeds for the GLU variants and 5 to 13 for Revival). Fixed learning
# rate: per-activation tuning is issue 19 item 1, not on main when this
# page was made.
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${1:-results-store}
shift || true
mkdir -p "$STORE"
URI="sqlite:///$(cd "$STORE" && pwd)/mlflow.db"
BIN=${KG_BIN:-$(dirname "$(command -v kg-train || echo .venv/bin/kg-train)")}
export KERAS_BACKEND=${KERAS_BACKEND:-tensorflow} TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

train() {  # name, then kg-train arguments
  local name=$1; shift
  echo "== $name: kg-train $*"
  "$BIN/kg-train" "$@" --tracking-uri "$URI" --output-dir "$STORE/reports/$name"
}

side_by_side() {  # runs each named part in the background, fails if any failed
  local pids=() failed=0
  for part in "$@"; do "$part" > "$STORE/$part.log" 2>&1 & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}

revival_ln() {  # 5 seeds per half (the plan: 5 for noLN ReLU, 8-13 with LayerNorm)
  train revival-layernorm --config configs/revival.yaml --set seeds=5
}
revival_noln() {
  train revival-no-layernorm --config configs/revival.yaml --set seeds=5 \
    --set model.layer_norm=false --set experiment=revival-no-layernorm
}
revival() { revival_ln; revival_noln; }
slope() {  # the learnable slope, out of weight decay, 3x longer, no LayerNorm
  train revival-slope-long --config configs/revival.yaml --set seeds=3 \
    --set model.layer_norm=false --set experiment=revival-slope-long \
    --set study=revival-slope --set "activations=[learnable_leaky_relu]" \
    --set baseline=learnable_leaky_relu --set training.epochs=24
}
glu_shard() {  # the shipped 3 seeds; one of 4 shards of one sweep
  train glu-variants --config configs/glu-variants.yaml --shard "$1/4"
}
glu_1() { glu_shard 1; }
glu_2() { glu_shard 2; }
glu_3() { glu_shard 3; }
glu_4() { glu_shard 4; }
glu() { side_by_side glu_1 glu_2 glu_3 glu_4; }
digits() {  # 5 seeds, as the paper's 5 runs
  train digits-gelu-paper --config configs/digits.yaml
}

train_all() { side_by_side revival_ln revival_noln slope glu digits; }

if [ $# -eq 0 ]; then
  train_all
  "$BIN/kg" results docs/results.md --store "$STORE" \
    --command "bash docs/make_results.sh $STORE"
else
  for part in "$@"; do "$part"; done
fi

#!/usr/bin/env bash
# Best GFLOP/s against trials, xgb against random search, for the three
# convolution workloads of make_conv_models.py (issue 4's proof).
#
#   bench/tuner/curves.sh OUT_DIR [RANDOM_TRIALS] [XGB_TRIALS] [CHUNKS]
#
# Each workload gets its own databases (OUT_DIR/<name>.random.db and
# .xgb.db, so the xgb model starts cold). The two tuners run in alternating
# chunks (random to 100, xgb to 30, random to 200, ...) so that both see the
# same machine load over the run; `kiln tune` resumes, so a chunk only adds
# trials. Conv configs may change channel blocks here (--free-layout): the
# whole space is searched. Then plot_curves.py writes OUT_DIR/curves.md and
# OUT_DIR/curves.png.
#
# CURVES_TINY=1 tunes three tiny convolutions instead (make_conv_models.py
# --tiny): what the smoke test bench/smoke/tuner_scripts_smoke.sh runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: curves.sh OUT_DIR [RANDOM_TRIALS] [XGB_TRIALS] [CHUNKS]}"
random_trials="${2:-1000}"
xgb_trials="${3:-300}"
chunks="${4:-10}"
kiln="${KILN:-$root/build/kiln}"
python="${PYTHON:-/usr/bin/python3}"

models_args=()
[[ ${CURVES_TINY:-0} == 1 ]] && models_args=(--tiny)

mkdir -p "$out"
"$python" "$here/make_conv_models.py" "${models_args[@]}" "$out/models" > /dev/null
for model in "$out"/models/*.onnx; do
  name="$(basename "$model" .onnx)"
  for ((c = 1; c <= chunks; c++)); do
    for tuner in random xgb; do
      [[ $tuner == random ]] && total=$((random_trials * c / chunks)) || total=$((xgb_trials * c / chunks))
      echo "== $name: $tuner to $total trials"
      "$kiln" tune "$model" --tuning-log "$out/$name.$tuner.db" --tuner "$tuner" \
        --trials "$total" --free-layout --in-graph 0 --report "$out/$name.$tuner.json" | tail -n 2
    done
  done
done
"$python" "$here/plot_curves.py" "$out"

#!/usr/bin/env bash
# Smoke test (ctest bench_fp32_goals_smoke) of fp32_goals.py on the tiny model:
# every step (zoo, shipped, extras, kernels, layers, curve) with budgets of seconds, then
# a second run that finds every step's result and runs none again. Checks the
# report's goals table and sections; no timing is checked. Skipped without
# the peers' venv's onnxruntime (bench/.venv, scripts/peers-venv.sh) or PyTorch.
#
#   goals_smoke.sh KILN WORKDIR KILN_BENCH_ISA
set -euo pipefail
source "$(dirname "$0")/common.sh"
kiln=${1:?usage: goals_smoke.sh KILN WORKDIR KILN_BENCH_ISA}
work=${2:?usage: goals_smoke.sh KILN WORKDIR KILN_BENCH_ISA}
bench_isa=${3:?usage: goals_smoke.sh KILN WORKDIR KILN_BENCH_ISA}
need_onnxruntime
need_python_modules torch torchvision onnx numpy matplotlib

rm -rf "$work"
mkdir -p "$work"
goals=(
  "$PYTHON" "$ROOT/bench/models/fp32_goals.py" --kiln "$kiln" --bench-isa "$bench_isa"
  --out "$work/out"
  --models-dir "$work/models" --zoo tiny --extras tiny --tune-above 0
  --zoo-budget 6 --zoo-trials 4 --extra-budget 6 --extra-trials 4
  --kernels-model tiny --layers-model tiny --curve-model tiny
  --curve-minutes 0.1 --curve-step-minutes 0.05
  --rounds 1 --repeat 3 --extras-rounds 1 --extras-repeat 3
  --tune-args "--batch 2 --repeat 1 --min-repeat-ms 0"
)
set -x
rc=0
"${goals[@]}" > "$work/report1.txt" 2> "$work/log1.txt" || rc=$?
cat "$work/log1.txt"
# 0: every goal met, 3: one missed (tiny's times say nothing); anything else is a failure.
[ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "fp32_goals.py exited $rc"
report=$work/out/report.md
for goal in 'zoo tuned/ORT geomean <= 0.75' 'every extra model <= 1.0x ORT' \
  'tiny within 5 % of its final latency'; do
  grep -Eq "^\| $goal[^|]* \| [^|]*[0-9][^|]* \| (met|MISSED) \|$" "$report" ||
    fail "report.md has no measured row for '$goal'"
done
grep -Eq '^\| check: the default build \(shipped logs\) no slower than the fallback \| default/fallback geomean [0-9.]+; slower on: [^|]+ \| (yes|no) \|$' \
  "$report" || fail "report.md has no shipped-log check"
grep -Eq '^\| tiny \| [0-9.]+ \| [0-9]+ of [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \|$' "$report" ||
  fail "report.md's extras table has no tuned row for tiny"
grep -Eq '^Peak: [0-9]+ GFLOP/s \([a-z0-9_]+-[a-z0-9]+ FMA chains' "$report" ||
  fail "report.md names no peak"
[ "$(grep -Ec '^\| fused_[^|]+ \| [^|]+ \| [0-9.]+ \| ([0-9]+|n/a) \| ([0-9]+ %|n/a) \|$' "$report")" -ge 3 ] ||
  fail "report.md lists fewer than 3 kernels"
grep -q '^| + in-graph |' "$report" || fail "report.md has no tuning curve"
[ -s "$work/out/layers.md" ] || fail "no layers.md"

# A second run resumes: every step's result exists, so none runs again.
"${goals[@]}" > "$work/report2.txt" 2> "$work/log2.txt" || true
if grep -Eq '^fp32_goals: step ' "$work/log2.txt"; then
  cat "$work/log2.txt"
  fail "the second run ran a step again"
fi
diff <(grep '^| ' "$work/report1.txt") <(grep '^| ' "$work/report2.txt") ||
  fail "the second run's report differs"

# A step that fails: exit status 1, the step named in report.md, the other results kept.
rc=0
"${goals[@]}" --steps kernels --redo kernels --kernels-model no_such_model \
  > "$work/report3.txt" 2> "$work/log3.txt" || rc=$?
[ "$rc" = 1 ] || fail "fp32_goals.py exited $rc for a missing model, not 1"
grep -q '^\*\*kernels failed:\*\*' "$report" || fail "report.md does not name the failed step"
grep -Eq '^\| zoo tuned/ORT geomean <= 0.75[^|]* \| [^|]*[0-9][^|]* \| (met|MISSED) \|$' "$report" ||
  fail "the failed step lost the zoo's result"

#!/usr/bin/env bash
# Smoke test (ctest bench_compile_calibrate_smoke) of bench/compile's
# calibration: two small workloads, a few sampled configs each, really lowered
# and compiled. Checks that every row has a positive size estimate and a
# compile time, never how long anything took.
#
#   compile_calibrate_smoke.sh CALIBRATE WORKDIR
set -euo pipefail
calibrate=${1:?usage: compile_calibrate_smoke.sh CALIBRATE WORKDIR}
work=${2:?usage: compile_calibrate_smoke.sh CALIBRATE WORKDIR}
rm -rf "$work" && mkdir -p "$work"
cat >"$work/workloads.txt" <<'KEYS'
dense_pack.x86(data=[7,24],weight=[24,40],dtype=float32)
conv2d_NCHWc.x86(data=[1,16,9,9],kernel=[24,16,3,3],strides=[1,1],pads=[1,1,1,1],dilation=[1,1],dtype=float32)
KEYS
"$calibrate" "$work/workloads.txt" --samples 6 --per-workload 2 >"$work/out.csv"
rows=$(tail -n +2 "$work/out.csv" | wc -l)
[ "$rows" -ge 4 ] || { echo "FAIL: $rows rows" >&2; cat "$work/out.csv" >&2; exit 1; }
# workload,config,which,estimate,lower_s,compile_s: estimates > 0, times present.
awk -F, 'NR > 1 && !($(NF-2) > 0 && $NF != "") { bad = 1; print "FAIL: " $0 > "/dev/stderr" }
         END { exit bad }' "$work/out.csv"
grep -q ",fallback," "$work/out.csv" || { echo "FAIL: no fallback row" >&2; exit 1; }
echo "compile calibrate smoke: $rows rows ok"

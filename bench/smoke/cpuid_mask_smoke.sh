#!/usr/bin/env bash
# Smoke test (ctest bench_cpuid_mask_smoke) of the peers held to AVX2 (bench/peers):
# isa_mask.py rewrites the cpuid instructions of kiln_cpuid_probe, and under cpuid_mask.so
# the probe must see AVX2 and FMA as the CPU reports them and every AVX-512, VNNI and AMX
# feature gone; with KILN_CPUID_MASK=none exactly what the CPU reports; without the library
# the rewritten probe must die of SIGILL (so a missing preload can never pass unnoticed).
# Then, where the peers' venv (bench/.venv) has onnxruntime, ORT through peer_isa.py: its
# Python must map the rewritten native module, and run_bench.py --isa avx2 must time ORT on
# the tiny model.
#
#   cpuid_mask_smoke.sh PROBE MASK_LIB WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
probe=${1:?usage: cpuid_mask_smoke.sh PROBE MASK_LIB WORKDIR}
mask=${2:?}
work=${3:?}
[ "$(uname -m)" = x86_64 ] || skip "cpuid masking is x86-64 only (this is $(uname -m))"
command -v objdump >/dev/null || skip "no objdump (binutils)"
rm -rf "$work"
mkdir -p "$work"
set -x
"$PYTHON" "$ROOT/bench/peers/isa_mask.py" "$probe" "$work/probe"
"$probe" >"$work/real.txt"
LD_PRELOAD=$mask "$work/probe" >"$work/masked.txt"
LD_PRELOAD=$mask KILN_CPUID_MASK=none "$work/probe" >"$work/none.txt"
cmp "$work/real.txt" "$work/none.txt" || fail "KILN_CPUID_MASK=none changed what CPUID reports"
for f in fma avx avx2; do
  grep -qx "$f $(awk -v f=$f '$1 == f {print $2}' "$work/real.txt")" "$work/masked.txt" ||
    fail "the avx2 mask changed $f"
done
grep -qx "avx2 1" "$work/real.txt" || skip "this CPU has no AVX2 (nothing to keep)"
for f in avx512f avx512bw avx512vnni avxvnni avx512bf16 amxint8; do
  grep -qx "$f 0" "$work/masked.txt" || fail "the avx2 mask left $f set"
done
rc=0
"$work/probe" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 132 ] || fail "the rewritten probe without cpuid_mask.so exited $rc, not SIGILL (132)"
rc=0
LD_PRELOAD=$mask KILN_CPUID_MASK=avx9 "$work/probe" >/dev/null 2>"$work/bad.txt" || rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown KILN_CPUID_MASK 'avx9'" "$work/bad.txt" ||
  fail "an unknown profile was not refused (exit $rc)"

set +x
why=$([ -x "$PEERS_PYTHON" ] && "$PEERS_PYTHON" "$ORT_RUN" check 2>&1) || {
  echo "cpuid_mask_smoke: the probe passed; ONNX Runtime part skipped" \
    "(${why:-no bench/.venv/bin/python; scripts/peers-venv.sh creates it})"
  exit 0
}
need_python_modules torch torchvision onnx numpy
set -x
"$PYTHON" "$ROOT/bench/models/generate.py" --out "$work/models" --models tiny
"$PYTHON" "$ROOT/bench/models/run_bench.py" --models tiny --models-dir "$work/models" \
  --kiln "$(dirname "$mask")/kiln" --isa avx2 --rounds 1 --repeat 3 --warmup 1 \
  --skip kiln,torch --out "$work/table.md"
grep -Eq '^\| tiny \| n/a \| [0-9.]+ \|' "$work/table.md" ||
  fail "run_bench.py --isa avx2 has no ORT time for tiny"
grep -q 'each engine AVX2 code' "$work/table.md" || fail "the table does not say --isa avx2"

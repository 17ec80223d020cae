#!/usr/bin/env bash
# Tuning for a device that cannot run the compiler, under qemu-user: cross-builds
# the runtime, kiln-run and kiln-measure-worker for aarch64 (KILN_RUNTIME_ONLY),
# runs `kiln tune --target aarch64 --runner "qemu-aarch64-static ...
# kiln-measure-worker --serve"` on a tiny CNN (3 tasks, 4 trials each), checks
# that every record was stored verified ("ok", with times, keyed by the aarch64
# target and the device's thread count), then builds the model with those
# records (--require-tuned), runs it with the cross-built kiln-run under qemu
# and compares with PyTorch (rel. err <= RTOL).
#
#   run_arm_qemu_tune.sh KILN WORKDIR RTOL
#
# Exits 77 (ctest: skipped) naming what is missing, like run_arm_qemu.sh (whose
# cross-build folder it shares; ctest runs the two one at a time). Times measured
# under qemu are meaningless: only that measurement works end to end is checked.
set -euo pipefail
KILN=$1 WORK=$2 RTOL=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3

missing=()
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
[ -e /usr/lib/aarch64-linux-gnu/libarchive.so ] || missing+=(libarchive-dev:arm64)
command -v ld.lld >/dev/null || command -v ld.lld-16 >/dev/null || missing+=(lld)
"$PYTHON" -c "import torch, onnx, numpy" 2>/dev/null || missing+=(python3-torch)
if [ ${#missing[@]} -gt 0 ]; then
  echo "arm qemu tune: SKIP: missing ${missing[*]} (scripts/install-deps.sh installs them)"
  exit 77
fi

mkdir -p "$WORK"
BUILD=$WORK/runtime-aarch64
echo "arm qemu tune: cross-building the runtime, kiln-run and kiln-measure-worker into $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_RUNTIME_ONLY=ON \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" >"$WORK/cmake-tune.log" 2>&1 ||
  { cat "$WORK/cmake-tune.log"; exit 1; }
cmake --build "$BUILD" >"$WORK/build-tune.log" 2>&1 || { cat "$WORK/build-tune.log"; exit 1; }
for exe in kiln-run kiln-measure-worker; do
  file "$BUILD/$exe" | grep -q "ARM aarch64" || { echo "FAIL: $exe is not aarch64" >&2; exit 1; }
done

MODEL=tiny
DIR=$WORK/models/$MODEL
if [ ! -f "$DIR/expected.npz" ]; then
  "$PYTHON" "$ROOT/bench/models/generate.py" --out "$WORK/models" --models "$MODEL" >/dev/null
fi
TARGET="llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"
# One kernel thread: qemu-user's emulation of the thread pool's waiting crawls.
# The worker's folders (libraries, reference cache) go under $WORK, not /tmp.
mkdir -p "$WORK/device-tmp"
QEMU="qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=$BUILD -E KILN_NUM_THREADS=1"
QEMU="$QEMU -E TMPDIR=$WORK/device-tmp"
DB=$WORK/$MODEL.aarch64-tuning.db
rm -f "$DB" "$DB-wal" "$DB-shm"
timeout 600 "$KILN" tune "$DIR/model.onnx" --tuning-log "$DB" --target "$TARGET" \
  --runner "$QEMU $BUILD/kiln-measure-worker --serve" \
  --trials 4 --batch 4 --tuner random --repeat 1 --min-repeat-ms 0 --timeout 60

# Every record verified and timed, keyed by the target and the device's one thread.
"$KILN" records export "$DB" -o "$WORK/$MODEL.aarch64-tuning.jsonl" >/dev/null
"$PYTHON" - "$WORK/$MODEL.aarch64-tuning.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# A candidate whose estimated code is over the compile budget is recorded as
# such without compiling it (Winograd's F(4x4) tiles on 4-lane NEON can be):
# a verdict, not a failure. Everything else must be verified and timed, and
# every workload needs a verified record.
bad = [r for r in recs if r["error"] != "compile_budget" and
       (r["error"] != "ok" or not r["times_ms"] or r["gflops"] <= 0)]
workloads = {r["workload"] for r in recs}
verified = {r["workload"] for r in recs if r["error"] == "ok"}
assert verified == workloads, f"workloads without a verified record: {workloads - verified}"
# tiny's tasks: two direct convolutions, the Winograd alternative of its 3x3
# stride-1 one, and the dense layer; 4 trials each.
assert len(recs) == 16 and len(workloads) == 4, f"expected 16 records of 4 workloads, got {len(recs)} of {len(workloads)}"
assert not bad, "records not verified and timed: " + "; ".join(f'{r["error"]}: {r["error_message"]}' for r in bad)
for r in recs:
    assert "-mtriple=aarch64-linux-gnu" in r["target"] and "threads=1" in r["target"], r["target"]
print(f"arm qemu tune: {len(recs)} records of {len(workloads)} workloads, all verified (times under qemu are meaningless)")
PY

# The correctness gate and fault handling on the device: every candidate carries a
# planted fault (KILN_MEASURE_WORKER_FAULT, test only); under qemu the worker runs
# candidates in itself (fork() hangs in qemu-user here), so a crash or a hang ends it
# after its result line and kiln restarts it. One trial per task.
for fault in garbage:wrong_result crash:runtime_error hang:timeout; do
  FDB=$WORK/$MODEL.aarch64-fault-${fault%%:*}.db
  rm -f "$FDB" "$FDB-wal" "$FDB-shm"
  timeout 300 "$KILN" tune "$DIR/model.onnx" --tuning-log "$FDB" --target "$TARGET" \
    --runner "$QEMU -E KILN_MEASURE_WORKER_FAULT=${fault%%:*} $BUILD/kiln-measure-worker --serve --no-fork" \
    --trials 1 --batch 1 --tuner random --repeat 1 --min-repeat-ms 0 --timeout 3 >/dev/null
  "$KILN" records export "$FDB" -o "$FDB.jsonl" >/dev/null
  "$PYTHON" - "$FDB.jsonl" "${fault%%:*}" "${fault##*:}" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
fault, want = sys.argv[2], sys.argv[3]
assert len(recs) == 4, f"{fault}: expected 4 records (one per task), got {len(recs)}"
bad = [f'{r["error"]}: {r["error_message"]}' for r in recs if r["error"] != want or r["times_ms"]]
assert not bad, f"{fault}: expected {want} without times, got " + "; ".join(bad)
print(f"arm qemu tune: planted {fault}: {len(recs)} records, all {want} ({recs[0]['error_message'][:60]})")
PY
done

# The records build the model, which runs on the "device" and matches PyTorch.
PKG=$WORK/$MODEL.aarch64-tuned.tar
OUT=$WORK/$MODEL.aarch64-tuned.out.npz
rm -f "$OUT"
# kiln build keys records by the thread count it would run with (KILN_NUM_THREADS, else
# this machine's cores): the device's, one here.
KILN_NUM_THREADS=1 "$KILN" build "$DIR/model.onnx" -o "$PKG" --target "$TARGET" --tuning-log "$DB" \
  --require-tuned >/dev/null
timeout 600 $QEMU "$BUILD/kiln-run" "$PKG" --inputs "$DIR/input.npz" --output "$OUT"
echo -n "arm qemu tune $MODEL (built with the tuned records): "
"$PYTHON" "$ROOT/bench/models/compare.py" "$DIR/expected.npz" "$OUT" --rtol "$RTOL"

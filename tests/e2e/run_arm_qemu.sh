#!/usr/bin/env bash
# Arm end to end under qemu-user: cross-builds the runtime and kiln-run for
# aarch64 (KILN_RUNTIME_ONLY, cmake/toolchains/aarch64-linux-gnu.cmake), builds
# each model with `kiln build --target aarch64`, runs it with the cross-built
# kiln-run under qemu-aarch64-static and compares with PyTorch (rel. err <= RTOL).
#
#   run_arm_qemu.sh KILN WORKDIR RTOL MODEL...
#
# Exits 77 (ctest: skipped) naming what is missing when the cross toolchain,
# qemu or the arm64 libraries are not installed (scripts/install-deps.sh
# installs them). Under qemu kiln-run uses one thread: qemu-user's emulation
# of the thread pool's waiting made 2-thread runs crawl. Times are meaningless
# there; only results are checked.
set -euo pipefail
KILN=$1 WORK=$2 RTOL=$3
shift 3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3

missing=()
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
[ -e /usr/lib/aarch64-linux-gnu/libtbb.so ] || missing+=(libtbb-dev:arm64)
[ -e /usr/lib/aarch64-linux-gnu/libarchive.so ] || missing+=(libarchive-dev:arm64)
command -v ld.lld >/dev/null || command -v ld.lld-16 >/dev/null || missing+=(lld)
"$PYTHON" -c "import torch, torchvision, onnx, numpy" 2>/dev/null || missing+=(python3-torch)
if [ ${#missing[@]} -gt 0 ]; then
  echo "arm qemu: SKIP: missing ${missing[*]} (scripts/install-deps.sh installs them)"
  exit 77
fi

mkdir -p "$WORK"
BUILD=$WORK/runtime-aarch64
echo "arm qemu: cross-building the runtime and kiln-run into $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_RUNTIME_ONLY=ON \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" >"$WORK/cmake.log" 2>&1 ||
  { cat "$WORK/cmake.log"; exit 1; }
cmake --build "$BUILD" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
file "$BUILD/kiln-run" | grep -q "ARM aarch64" || { echo "FAIL: kiln-run is not aarch64" >&2; exit 1; }

TARGET="llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"
for MODEL in "$@"; do
  DIR=$WORK/models/$MODEL
  if [ ! -f "$DIR/expected.npz" ]; then
    "$PYTHON" "$ROOT/bench/models/generate.py" --out "$WORK/models" --models "$MODEL" >/dev/null
  fi
  PKG=$WORK/$MODEL.aarch64.tar
  "$KILN" build "$DIR/model.onnx" -o "$PKG" --target "$TARGET" >/dev/null
  OUT=$WORK/$MODEL.aarch64.out.npz
  rm -f "$OUT"
  timeout 600 qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$BUILD" \
    -E KILN_NUM_THREADS=1 "$BUILD/kiln-run" "$PKG" --inputs "$DIR/input.npz" --output "$OUT"
  echo -n "arm qemu $MODEL: "
  "$PYTHON" "$ROOT/bench/models/compare.py" "$DIR/expected.npz" "$OUT" --rtol "$RTOL"
done

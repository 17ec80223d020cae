#!/usr/bin/env bash
# Arm end to end under qemu-user: cross-builds the runtime and kiln-run for
# ARCH (KILN_RUNTIME_ONLY, cmake/toolchains/*.cmake), builds each model with
# `kiln build --target` for that Arm CPU, runs it with the cross-built kiln-run
# under qemu-user and compares with PyTorch (rel. err <= RTOL).
#
#   run_arm_qemu.sh ARCH KILN WORKDIR RTOL MODEL...
#
#   ARCH aarch64: Raspberry Pi 4, 64-bit OS (cortex-a72, 32 NEON registers)
#   ARCH armv7:   Raspberry Pi 2/3/4, 32-bit OS (cortex-a7, hard float, NEON,
#                 16 quad registers)
#
# Exits 77 (ctest: skipped) naming what is missing when the cross toolchain,
# qemu or the Arm libraries are not installed (scripts/install-deps.sh
# installs them). Under qemu kiln-run uses one thread: qemu-user's emulation
# of the thread pool's waiting made 2-thread runs crawl. Times are meaningless
# there; only results are checked.
set -euo pipefail
ARCH=$1 KILN=$2 WORK=$3 RTOL=$4
shift 4
case $ARCH in
  aarch64)
    GNU=aarch64-linux-gnu DEB_ARCH=arm64 QEMU=qemu-aarch64-static ARCHIVE_LIB=libarchive.so
    FILE_MACHINE="ARM aarch64"
    TARGET="llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72" ;;
  armv7)
    GNU=arm-linux-gnueabihf DEB_ARCH=armhf QEMU=qemu-arm-static ARCHIVE_LIB=libarchive.so.13
    FILE_MACHINE="32-bit LSB .* ARM, EABI5"
    TARGET="llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon" ;;
  *) echo "run_arm_qemu.sh: unknown ARCH '$ARCH' (aarch64 or armv7)" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=/usr/bin/python3

missing=()
command -v $GNU-g++ >/dev/null || missing+=(g++-$GNU)
command -v $QEMU >/dev/null || missing+=(qemu-user-static)
[ -e /usr/lib/$GNU/$ARCHIVE_LIB ] || missing+=(libarchive:$DEB_ARCH)
command -v ld.lld >/dev/null || command -v ld.lld-16 >/dev/null || missing+=(lld)
"$PYTHON" -c "import torch, torchvision, onnx, numpy" 2>/dev/null || missing+=(python3-torch)
if [ ${#missing[@]} -gt 0 ]; then
  echo "arm qemu ($ARCH): SKIP: missing ${missing[*]} (scripts/install-deps.sh installs them)"
  exit 77
fi

mkdir -p "$WORK"
BUILD=$WORK/runtime-$ARCH
echo "arm qemu: cross-building the runtime and kiln-run into $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_RUNTIME_ONLY=ON \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/$GNU.cmake" >"$WORK/cmake.log" 2>&1 ||
  { cat "$WORK/cmake.log"; exit 1; }
cmake --build "$BUILD" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
file "$BUILD/kiln-run" | grep -q "$FILE_MACHINE" || { echo "FAIL: kiln-run is not $ARCH" >&2; exit 1; }

for MODEL in "$@"; do
  DIR=$WORK/models/$MODEL
  if [ ! -f "$DIR/expected.npz" ]; then
    "$PYTHON" "$ROOT/bench/models/generate.py" --out "$WORK/models" --models "$MODEL" >/dev/null
  fi
  PKG=$WORK/$MODEL.$ARCH.tar
  "$KILN" build "$DIR/model.onnx" -o "$PKG" --target "$TARGET" >/dev/null
  OUT=$WORK/$MODEL.$ARCH.out.npz
  rm -f "$OUT"
  timeout 600 $QEMU -L /usr/$GNU -E LD_LIBRARY_PATH="$BUILD" \
    -E KILN_NUM_THREADS=1 "$BUILD/kiln-run" "$PKG" --inputs "$DIR/input.npz" --output "$OUT"
  echo -n "arm qemu ($ARCH) $MODEL: "
  "$PYTHON" "$ROOT/bench/models/compare.py" "$DIR/expected.npz" "$OUT" --rtol "$RTOL"
done

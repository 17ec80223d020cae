#!/usr/bin/env bash
# Installs every Debian 12 package kiln needs to build, test and benchmark.
# Safe to re-run: apt-get skips what is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  llvm-16-dev libzstd-dev zlib1g-dev libffi-dev libedit-dev libxml2-dev
  # ld.lld links packages cross-compiled for Arm (aarch64, armv7)
  lld
  libtbb-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libsqlite3-dev libarchive-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers clang-format
  libonnx-dev libprotobuf-dev protobuf-compiler
  # the tuner's cost model; the `xgboost` package holds /usr/bin/xgboost, which
  # libxgboost-dev's CMake config references.
  libxgboost-dev xgboost
  # bench/models and tests/e2e: PyTorch makes the models and is a timed peer; OpenBLAS replaces
  # the reference BLAS that Debian's PyTorch would otherwise call for its matmuls; node runs
  # the ONNX Runtime peer (bench/models/ort_bench.js).
  python3-torch python3-torchvision python3-onnx python3-numpy python3-matplotlib libopenblas0-openmp nodejs
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# npm ships inside NodeSource's nodejs but is its own package in Debian's.
command -v npm >/dev/null 2>&1 || missing+=(npm)

export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  # A mirror mid-sync fails one index; what is needed may still install.
  $SUDO apt-get update -qq || echo "install-deps: warning: apt-get update reported errors"
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Arm: the aarch64 cross compiler, qemu-user and arm64 libraries (multiarch)
# for cross-building the runtime and running packages under qemu
# (tests/e2e/run_arm_qemu.sh). Optional: without them that test is skipped
# with a message, so a failure here only warns.
ARM_PACKAGES=(g++-aarch64-linux-gnu qemu-user-static libtbb-dev:arm64 libarchive-dev:arm64)
arm_missing=()
for p in "${ARM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm_missing+=("$p")
done
if [ ${#arm_missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${arm_missing[*]}"
  if ! { dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64; } ||
    ! $SUDO apt-get update -qq ||
    ! $SUDO apt-get install -y -qq --no-install-recommends "${arm_missing[@]}"; then
    echo "install-deps: warning: could not install ${arm_missing[*]}; the Arm qemu test will be skipped"
  fi
fi

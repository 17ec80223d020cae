#!/usr/bin/env bash
# Installs every Debian 12 package kiln needs to build, test and benchmark.
# Safe to re-run: apt-get skips what is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  llvm-16-dev libzstd-dev zlib1g-dev libffi-dev libedit-dev libxml2-dev
  # ld.lld links packages cross-compiled for Arm (aarch64, armv7)
  lld
  libgtest-dev libgmock-dev
  nlohmann-json3-dev libsqlite3-dev libarchive-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers clang-format
  # scripts/test.sh --sanitize and scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  # ONNX's backend conformance data (node, simple, pytorch-converted, pytorch-operator), which
  # tests/conformance runs through kiln
  libonnx-testdata
  # the tuner's cost model; the `xgboost` package holds /usr/bin/xgboost, which
  # libxgboost-dev's CMake config references.
  libxgboost-dev xgboost
  # bench/models and tests/e2e: PyTorch makes the models and is a timed peer; OpenBLAS replaces
  # the reference BLAS that Debian's PyTorch would otherwise call for its matmuls.
  python3-torch python3-torchvision python3-onnx python3-numpy python3-matplotlib libopenblas0-openmp
  # the peers' virtual environment, bench/.venv (below): ONNX Runtime from Python's package index
  python3-venv
  # the kiln Python package (python/, src/python) and its tests (tests/python)
  python3-dev python3-pybind11 python3-pytest
  # shared records in PostgreSQL (src/tuner/records_postgres.cc links libpq); the tests start a
  # throwaway server (tests/postgres) with postgresql's initdb/pg_ctl
  libpq-dev postgresql
  # bench/models/cache_misses.py: cachegrind counts a kernel's misses under another CPU's L2
  valgrind
  # kiln tune --job: the job file is TOML (toml++, header-only); tests/driver/tune_job_test.cc
  # opens the HTML report in headless Chromium
  libtomlplusplus-dev chromium
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  # A mirror mid-sync fails one index; what is needed may still install.
  $SUDO apt-get update -qq || echo "install-deps: warning: apt-get update reported errors"
  $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
fi

# Arm: cross compilers, qemu-user and the Arm libraries the runtime links
# (multiarch) for cross-building the runtime and running packages under qemu
# (tests/e2e/run_arm_qemu.sh): arm64 for aarch64, armhf for armv7. Optional:
# without them those tests are skipped with a message, so a failure here only
# warns. --no-remove: a multiarch library whose version lags the host's (a
# mirror mid-sync) must never make apt remove the host's packages. armv7
# links libarchive13 alone (cmake/toolchains/arm-linux-gnueabihf.cmake): its
# -dev package would pull every compression library's -dev package for armhf.
install_arm() {
  local arch=$1
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "install-deps: installing ${missing[*]}"
  if ! { dpkg --print-foreign-architectures | grep -qx "$arch" || $SUDO dpkg --add-architecture "$arch"; } ||
    ! { $SUDO apt-get update -qq || true; } ||
    ! $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"; then
    echo "install-deps: warning: could not install ${missing[*]}; the $arch qemu test will be skipped"
  fi
}
install_arm arm64 g++-aarch64-linux-gnu qemu-user-static libarchive-dev:arm64
install_arm armhf g++-arm-linux-gnueabihf qemu-user-static libarchive13:armhf

# The peers kiln is measured against, from Python's package index: bench/.venv, made with
# Debian's python3-venv from the pinned bench/requirements-peers.txt (ONNX Runtime, the
# `onnxruntime` package, 1.31 or newer). The bench drivers and the tests that check kiln against
# ORT on the same file run it there (bench/peers/ort_run.py) and skip, saying so, without it.
# Optional, like the Arm tools: where the index is out of reach this only warns. Quick when the
# venv already holds the pinned versions: pip is not asked at all.
root="$(cd "$(dirname "$0")/.." && pwd)"
venv_python="$root/bench/.venv/bin/python"
if [ -x "$venv_python" ] && "$venv_python" - "$root/bench/requirements-peers.txt" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import onnxruntime  # noqa: F401  (installed and loading, not only recorded)
for line in open(sys.argv[1]):
    req = line.split("#")[0].strip()
    if req:
        name, _, want = req.partition("==")
        if version(name.strip()) != want.strip():
            sys.exit(1)
PY
then
  echo "install-deps: bench/.venv has the pinned peers ($("$venv_python" -c 'import onnxruntime; print("onnxruntime", onnxruntime.__version__)'))"
else
  echo "install-deps: creating bench/.venv (scripts/peers-venv.sh)"
  # Bounded: where the index is unreachable pip retries for minutes.
  PIP_DEFAULT_TIMEOUT=20 PIP_RETRIES=1 timeout 600 "$root/scripts/peers-venv.sh" ||
    echo "install-deps: warning: could not create bench/.venv from Python's package index;" \
      "the ONNX Runtime comparisons and checks will be skipped (re-run scripts/peers-venv.sh later)"
fi

# Shared by the bench drivers' smoke tests (sourced, not run).
#
# A test that lacks something it needs exits 77, which bench/CMakeLists.txt
# registers as SKIP_RETURN_CODE: ctest then reports it as skipped with this
# message, never as passed and never as failed on a machine without extras.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Debian's python3 carries torch and onnx; a `python3` first on PATH may not.
PYTHON=${KILN_BENCH_PYTHON:-/usr/bin/python3}

skip() {
  echo "SKIP: $*" >&2
  exit 77
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Skips naming every Python module of "$@" that $PYTHON cannot import.
need_python_modules() {
  [ -x "$PYTHON" ] || skip "no $PYTHON (set KILN_BENCH_PYTHON, or run scripts/install-deps.sh)"
  local missing
  missing=$("$PYTHON" - "$@" <<'PY'
import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
PY
  ) || skip "$PYTHON does not run"
  [ -z "$missing" ] ||
    skip "$PYTHON cannot import: $missing (scripts/install-deps.sh installs python3-torch," \
      "python3-torchvision, python3-onnx, python3-numpy, python3-matplotlib)"
}

# ONNX Runtime: the `onnxruntime` package of the peers' venv (bench/.venv, made by
# scripts/peers-venv.sh from bench/requirements-peers.txt), reached through bench/peers/ort_run.py.
PEERS_PYTHON=$ROOT/bench/.venv/bin/python
ORT_RUN=$ROOT/bench/peers/ort_run.py

# Skips, saying what is missing, unless the peers' venv imports onnxruntime (1.31 or newer).
need_onnxruntime() {
  [ -x "$PEERS_PYTHON" ] || skip "no bench/.venv/bin/python (the peers' venv;" \
    "scripts/peers-venv.sh or scripts/install-deps.sh creates it)"
  local why
  why=$("$PEERS_PYTHON" "$ORT_RUN" check 2>&1) || skip "${why##*$'\n'}"
  echo "$why"
}

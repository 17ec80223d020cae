#!/usr/bin/env bash
# Creates bench/.venv with the pinned peers of bench/requirements-peers.txt
# (ONNX Runtime from Python's package index). Re-running only installs what
# changed. Used for the peer figures, e.g. ONNX Runtime on ONNX's conformance
# suite:  bench/.venv/bin/python tests/conformance/run_conformance.py --engine ort
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed" ||
  { $SUDO apt-get update -qq || true; $SUDO apt-get install -y -qq python3-venv; }
[ -x bench/.venv/bin/python ] || /usr/bin/python3 -m venv bench/.venv
bench/.venv/bin/pip install -q -r bench/requirements-peers.txt
bench/.venv/bin/python -c "import onnxruntime; print('peers-venv: onnxruntime', onnxruntime.__version__)"

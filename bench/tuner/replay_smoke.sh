#!/usr/bin/env bash
# Smoke test (ctest bench_tuner_replay_smoke) of kiln_tuner_replay: a small
# synthetic records database (kiln_tuner_replay_fixture), replayed with few
# seeds. The search is the real one; only the records are made up, so no
# database from a long tuning session is needed. Checks that it runs through,
# not what it finds.
#
#   replay_smoke.sh FIXTURE REPLAY WORKDIR
set -euo pipefail
fixture=${1:?usage: replay_smoke.sh FIXTURE REPLAY WORKDIR}
replay=${2:?usage: replay_smoke.sh FIXTURE REPLAY WORKDIR}
work=${3:?usage: replay_smoke.sh FIXTURE REPLAY WORKDIR}
mkdir -p "$work"
"$fixture" "$work/replay.db" --configs 48
"$replay" "$work/replay.db" --seeds 2 --batch 8 | tee "$work/replay.txt"
grep -q '^conv2d_NCHWc\.x86(' "$work/replay.txt" || {
  echo "FAIL: kiln_tuner_replay printed nothing for the fixture's workload" >&2
  exit 1
}
grep -q 'trials' "$work/replay.txt" || {
  echo "FAIL: kiln_tuner_replay printed no trial counts" >&2
  exit 1
}

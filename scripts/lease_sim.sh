#!/usr/bin/env bash
# The lease simulation, longer (bench/tuner/lease_sim.h; the suite runs a 12-s slice as
# LeaseSim.HundredWorkersShareOneDatabaseWithoutDuplicates): 100 simulated tuners, each
# with its own connection, against a throwaway PostgreSQL server on loopback with the
# server's durable defaults, at three measurement times per config:
#   1000 ms (a real candidate: compile + verify + time), 100 ms, 10 ms (the ceiling).
# Figures go to stdout; bench/tuner/results/lease-sim-*.md holds a run's.
#   scripts/lease_sim.sh [SECONDS=60] [WORKERS=100]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
workers=${2:-100}
[ -x build/bench/kiln_lease_sim ] || nice -n 15 cmake --build build --target kiln_lease_sim
for ms in 1000 100 10; do
  echo "== ${workers} workers, ${ms} ms per measurement, ${seconds} s"
  nice -n 15 build/bench/kiln_lease_sim --workers "$workers" --seconds "$seconds" \
    --measure-ms "$ms" --tasks 50 --space 4000 --trials 2000 --batch 8
done

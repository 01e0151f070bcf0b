#!/usr/bin/env bash
# Fleet health under a fleet, measured at the backends (`rollcall-fleet probes`): one pool of
# ENDPOINTS real HTTP backends on 127.0.0.1, the real controller, SIDECARS real sidecars (the
# sidecar's crate as a library, in one process) with `healthCheck.checkers: 3` and 1 s probes
# (fall 3, rise 2). Prints one `fleet-probes:` line per run (bench/README.md explains them):
# - checkers=3 with SIDECARS sidecars;
# - checkers=0 with BASELINE_SIDECARS sidecars: every sidecar probes every endpoint, as without
#   fleet health, at the fleet size this machine sustains that way;
# - checkers=off with SIDECARS sidecars and no health checks at all: the controller's CPU and RSS
#   with the same fleet and none of this, the baseline of its cost.
#   ./bench/fleet-probes.sh
#   SIDECARS=200 ENDPOINTS=50 ./bench/fleet-probes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIDECARS=${SIDECARS:-1000}
ENDPOINTS=${ENDPOINTS:-100}
BASELINE_SIDECARS=${BASELINE_SIDECARS:-50}
# shellcheck source=bench/fleet-build.sh
. bench/fleet-build.sh
"$fleet" probes --sidecars "$SIDECARS" --endpoints "$ENDPOINTS" --checkers 3
"$fleet" probes --sidecars "$BASELINE_SIDECARS" --endpoints "$ENDPOINTS" --checkers 0
"$fleet" probes --sidecars "$SIDECARS" --endpoints "$ENDPOINTS" --passive

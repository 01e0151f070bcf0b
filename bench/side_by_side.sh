#!/usr/bin/env bash
# CPU per request of the sidecar and HAProxy measured at the same time on the same CPU (see
# bench/side_by_side.py): the steadier figure on a shared machine, where bench/run.sh's runs one
# after the other move by more than the gap being measured. Installs nginx, HAProxy and wrk if
# missing, builds the sidecar as shipped unless SKIP_BUILD=1, writes to bench/out/side-by-side/.
#   ./bench/side_by_side.sh
#   SIDECAR_ARGS="--http1-engine hyper" ROUNDS=12 ./bench/side_by_side.sh   # hyper's engine
#   OTHER=nginx BODIES=16k ./bench/side_by_side.sh
#   OTHER=before BEFORE=/tmp/old/rollcall-sidecar ./bench/side_by_side.sh   # A/B two builds
# Environment: ROUNDS (8; even, so each proxy starts first as often), DURATION (5s), WARMUP (1s), CONNECTIONS (32 per proxy), BODIES
# ("small 16k"), OTHER (haproxy, nginx, or before: the BEFORE binary), SIDECAR, SIDECAR_ARGS, FORWARDING_FIELDS, BASE_PORT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf '%s\n' "$*" >&2; }
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk
if [ "${SKIP_BUILD:-0}" != 1 ] && [ -z "${SIDECAR:-}" ]; then
    (cd "$ROOT" && cargo build --profile sidecar -p rollcall-dataplane --bin rollcall-sidecar)
fi
PATH="$PATH:/usr/sbin:/sbin" exec python3 "$ROOT/bench/side_by_side.py"

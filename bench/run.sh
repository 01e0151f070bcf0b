#!/usr/bin/env bash
# Proxy overhead: rollcall-sidecar against HAProxy and nginx, same backends, same load, one run.
#
# Installs nginx, HAProxy and wrk if missing, builds the sidecar in release, then runs
# bench/proxybench.py: two nginx backends (small and 16 KiB bodies), each proxy in turn under
# wrk, pinned (proxy on CPU 0, load and backends on CPU 1) and shared (nothing pinned, 1 and 2
# proxy threads), rounds interleaved, medians with min-max, ratios against HAProxy and nginx.
# Everything it writes goes to bench/out/; every process it starts is stopped on exit.
# See bench/README.md for how to read the numbers.
#
# Environment: MODES ("pinned shared-1 shared-2"), BODIES ("small 16k"), ROUNDS (3),
# DURATION (5s), WARMUP (1s), CONNECTIONS (64), ONLY ("direct rollcall haproxy nginx"),
# BASE_PORT (18080), SKIP_BUILD=1 (reuse target/sidecar), SIDECAR (another sidecar binary),
# SIDECAR_ARGS (extra sidecar flags), SIDECAR_THREADS_FLAG=0 (a sidecar without --threads).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf '%s\n' "$*" >&2; }

# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk

# The sidecar as the image ships it: the `sidecar` profile (LTO; about 4 minutes from cold).
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building the sidecar (cargo build --profile sidecar -p rollcall-dataplane --bin rollcall-sidecar)"
    (cd "$ROOT" && cargo build --profile sidecar -p rollcall-dataplane --bin rollcall-sidecar)
fi
[ -x "$ROOT/target/sidecar/rollcall-sidecar" ] || { log "missing target/sidecar/rollcall-sidecar"; exit 1; }
PATH="$PATH:/usr/sbin:/sbin" exec python3 "$ROOT/bench/proxybench.py"

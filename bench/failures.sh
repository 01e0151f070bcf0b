#!/usr/bin/env bash
# Failure scenarios: what clients see when a backend fails, through rollcall-sidecar, HAProxy and
# nginx, on one machine in one run.
#
# Installs HAProxy and nginx with apt-get if missing, builds the release binaries once, then runs
# rollcall-failbench (testkit/src/bin/rollcall-failbench/): three in-process backends, each proxy
# started fresh per scenario in front of them, 200 req/s (every 5th a POST), backend 2 broken at
# t=3s (killed, black-holed, failing fast with 503 or 500, failing 1% or 20% with 500, refusing
# connections for 5 s then back), or every backend at once (/healthz failing, 20% shed with 503),
# and two shapes of their own: black-holed under round robin, and one fast backend failing 20%
# with 500 among three that take 50 ms (four backends, least request),
# one table per scenario. Tables go to stdout and bench/out/failures.txt; configs, per-run proxy logs and the
# proxies' own counters to bench/out/failures/. See bench/README.md for how to read them.
#
# Environment: RATE (200), DURATION (10, seconds per scenario and proxy), INJECT_AT (3),
# ONLY ("rollcall haproxy nginx"), SCENARIOS (all: "killed black-holed failing-503 failing-500 rare-500
# healthz-all-fail fifth-500 all-shed-503 refused-5s black-holed-rr fifth-500-fast-of-4 slow
# slow-recovers mild-slow mild-slow-recovers flapping"), ROLLCALL_ALGORITHM (rollcall's balancer where the
# others use least connections: LeastRequest or PeakEwma; default its policy default),
# SKIP_BUILD=1 (reuse target/release), ROLLCALL_LOG (info).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out"
WORK="$OUT/failures"
BIN="$ROOT/target/release"
RATE="${RATE:-200}"
DURATION="${DURATION:-10}"
INJECT_AT="${INJECT_AT:-3}"
ONLY="${ONLY:-rollcall haproxy nginx}"
SCENARIOS="${SCENARIOS:-killed black-holed failing-503 failing-500 rare-500 healthz-all-fail fifth-500 all-shed-503 refused-5s black-holed-rr fifth-500-fast-of-4 slow slow-recovers mild-slow mild-slow-recovers flapping}"
ROLLCALL_ALGORITHM="${ROLLCALL_ALGORITHM:-}"

log() { printf '%s\n' "$*" >&2; }

DRIVER_PID=""
cleanup() {
    # The driver stops each proxy itself (also on SIGTERM); this is the safety net.
    if [ -n "$DRIVER_PID" ]; then
        kill -TERM "$DRIVER_PID" 2>/dev/null || true
        wait "$DRIVER_PID" 2>/dev/null || true
    fi
    if [ -f "$WORK/nginx.pid" ]; then
        kill -TERM "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- tools ---------------------------------------------------------------------------------
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy

# --- build ---------------------------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building release binaries (cargo build --release -p rollcall-dataplane -p rollcall-testkit --bins)"
    (cd "$ROOT" && cargo build --release -p rollcall-dataplane -p rollcall-testkit --bins)
fi
[ -x "$BIN/rollcall-failbench" ] || { log "missing $BIN/rollcall-failbench (build it or unset SKIP_BUILD)"; exit 1; }

# A proxy that is not installed or not built is left out with a message; the others still run.
proxies=()
for p in $ONLY; do
    case "$p" in
        rollcall) [ -x "$BIN/rollcall-sidecar" ] || { log "SKIPPED rollcall: $BIN/rollcall-sidecar is not built"; continue; } ;;
        haproxy) [ -n "$HAPROXY" ] || { log "SKIPPED haproxy: not installed"; continue; } ;;
        nginx) [ -n "$NGINX" ] || { log "SKIPPED nginx: not installed"; continue; } ;;
    esac
    proxies+=("$p")
done
[ "${#proxies[@]}" -gt 0 ] || { log "no proxy to run"; exit 1; }

rm -rf "$WORK" "$OUT/failures.txt"
mkdir -p "$WORK"
{
    echo "run: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "tools: $("$NGINX" -v 2>&1 | sed 's/.*: //'), $("$HAPROXY" -v | awk 'NR==1 {print "haproxy " $3}'), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (rollcall)"
    echo "rollcall balancer: ${ROLLCALL_ALGORITHM:-its default}"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
} | tee "$WORK/tools.txt" >&2

# --- run -----------------------------------------------------------------------------------
# In the background and waited for, so a ctrl-c reaches the trap, which stops the driver with
# SIGTERM (it then stops the proxy it is running).
ROLLCALL_LOG="${ROLLCALL_LOG:-info}" "$BIN/rollcall-failbench" \
    --rate "$RATE" --duration "$DURATION" --inject-at "$INJECT_AT" \
    --only "${proxies[*]}" --scenarios "$SCENARIOS" --rollcall-algorithm "$ROLLCALL_ALGORITHM" \
    --sidecar "$BIN/rollcall-sidecar" --haproxy "$HAPROXY" --nginx "$NGINX" \
    --work-dir "$WORK" --results "$OUT/failures.txt" &
DRIVER_PID=$!
status=0
wait "$DRIVER_PID" || status=$?
DRIVER_PID=""
if [ "$status" = 0 ]; then
    { cat "$WORK/tools.txt"; echo; cat "$OUT/failures.txt"; } >"$OUT/failures.txt.tmp"
    mv "$OUT/failures.txt.tmp" "$OUT/failures.txt"
fi
exit "$status"

#!/usr/bin/env bash
# The sidecar's memory by roster size: rollcall-sidecar started from a roster file of one pool
# with N endpoints (probes off, nothing listening at the endpoints, so no connection is ever
# made), its RSS read from /proc once it serves, and the cost per endpoint from the difference
# to a one-endpoint pool. HAProxy with the same number of servers, health checks off, for
# comparison when it is installed. One line per size, starting `memory:`.
#   ./bench/memory.sh                 # 1, 1000 and 5000 endpoints
#   SIZES="1 20000" ./bench/memory.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out/memory"
SIZES="${SIZES:-1 1000 5000}"
SETTLE="${SETTLE:-2}"
BASE_PORT="${BASE_PORT:-19080}"
BIN="$ROOT/target/release"
mkdir -p "$OUT"
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -p rollcall-dataplane --bin rollcall-sidecar
fi

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# Endpoint i of a pool: 10.a.b.c:8080, distinct for i < 16 million.
address() { echo "10.$(($1 / 65536 % 256)).$(($1 / 256 % 256)).$(($1 % 256)):8080"; }

wait_listening() {
  local port=$1 pid=$2
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "process $pid exited; see $OUT" >&2
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing listens on $port" >&2
  return 1
}

# The RSS of process $1 once it listens on port $2 and SETTLE seconds passed; stops it either way.
measure() {
  local pid=$1 port=$2
  if ! wait_listening "$port" "$pid"; then
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  sleep "$SETTLE"
  rss_kib "$pid"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

rollcall() {
  local n=$1 config="$OUT/sidecar-$1.yaml"
  local listen=$((BASE_PORT + 1)) admin=$((BASE_PORT + 2))
  {
    echo "pools:"
    echo "- name: big"
    echo "  listen: 127.0.0.1:$listen"
    echo "  policy: {healthCheck: {type: None}}"
    echo "  endpoints:"
    for i in $(seq 1 "$n"); do echo "  - {address: $(address "$i")}"; done
  } > "$config"
  ROLLCALL_LOG=warn "$BIN/rollcall-sidecar" --config "$config" \
    --admin-listen "127.0.0.1:$admin" > "$OUT/sidecar-$n.log" 2>&1 &
  measure $! "$listen"
}

haproxy_rss() {
  local n=$1 config="$OUT/haproxy-$1.cfg" listen=$((BASE_PORT + 3))
  {
    printf 'global\n  maxconn 1000\ndefaults\n  mode http\n  timeout connect 1s\n'
    printf '  timeout client 10s\n  timeout server 10s\n'
    printf 'frontend f\n  bind 127.0.0.1:%s\n  default_backend b\nbackend b\n' "$listen"
    for i in $(seq 1 "$n"); do echo "  server s$i $(address "$i")"; done
  } > "$config"
  haproxy -f "$config" -db > "$OUT/haproxy-$n.log" 2>&1 &
  measure $! "$listen"
}

base=""
for n in $SIZES; do
  r=$(rollcall "$n")
  line="memory: endpoints=$n rollcall_rss_kib=$r"
  if [ -z "$base" ]; then base_n=$n base=$r; fi
  if [ "$n" -gt "$base_n" ]; then
    line="$line rollcall_per_endpoint_bytes=$(((r - base) * 1024 / (n - base_n)))"
  fi
  if command -v haproxy > /dev/null; then
    h=$(haproxy_rss "$n")
    line="$line haproxy_rss_kib=$h"
  fi
  echo "$line"
done

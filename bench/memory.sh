#!/usr/bin/env bash
# The sidecar's memory by roster size, next to HAProxy's. For each size N: the sidecar started
# from a roster file of one pool with N endpoints (probes off), its RSS and its anonymous memory
# (what each pod pays; the rest of RSS is the binary's code, shared by every sidecar of a node
# through the page cache) read from /proc once it serves, and the cost per endpoint from the
# difference to the smallest size. Then, for the largest size, TRAFFIC seconds of wrk load
# through it to live endpoints (one nginx listening on N loopback addresses) and the same
# figures again, HAProxy alike. One line per measurement, starting `memory:`.
#   ./bench/memory.sh                       # 1, 1000 and 5000 endpoints, then 60 s of traffic
#   SIZES="1 20000" TRAFFIC=10 ./bench/memory.sh
#   TRAFFIC=0 ./bench/memory.sh             # no traffic run
#   SIDECAR_FLAGS="--max-idle-connections 256" ./bench/memory.sh   # extra sidecar flags
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out/memory"
SIZES="${SIZES:-1 1000 5000}"
SETTLE="${SETTLE:-2}"
TRAFFIC="${TRAFFIC:-60}"
BASE_PORT="${BASE_PORT:-19080}"
SIDECAR="${SIDECAR:-$ROOT/target/sidecar/rollcall-sidecar}"
log() { printf '%s\n' "$*" >&2; }
mkdir -p "$OUT"
# A pid file left by an earlier run must not name a process this run would stop.
rm -f "$OUT/nginx/nginx.pid"
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --profile sidecar -p rollcall-dataplane --bin rollcall-sidecar
fi

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$OUT/nginx/nginx.pid" ] && kill "$(cat "$OUT/nginx/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

# RSS and anonymous memory of process $1, in KiB: "rss anon".
memory_kib() {
  awk '/^Rss:/ {r = $2} /^Anonymous:/ {a = $2} END {print r, a}' "/proc/$1/smaps_rollup"
}

# Endpoint i (1-based) of a pool: a distinct loopback address, all on one port, so one nginx
# can serve them all.
ENDPOINT_PORT=$((BASE_PORT + 5))
address() { echo "127.$(($1 / 62500 % 250)).$(($1 / 250 % 250)).$(($1 % 250 + 2)):$ENDPOINT_PORT"; }

wait_listening() {
  local port=$1 pid=$2
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "process $pid exited; see $OUT"
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  log "nothing listens on $port"
  return 1
}

# start_rollcall N: the sidecar for N endpoints in the background; sets PID and PORT.
start_rollcall() {
  local n=$1 config="$OUT/sidecar-$1.yaml"
  PORT=$((BASE_PORT + 1))
  {
    echo "pools:"
    echo "- name: big"
    echo "  listen: 127.0.0.1:$PORT"
    echo "  policy: {healthCheck: {type: None}}"
    echo "  endpoints:"
    for i in $(seq 1 "$n"); do echo "  - {address: \"$(address "$i")\"}"; done
  } > "$config"
  # shellcheck disable=SC2086 # SIDECAR_FLAGS is a list of flags
  ROLLCALL_LOG=warn "$SIDECAR" --config "$config" \
    --admin-listen "127.0.0.1:$((BASE_PORT + 2))" ${SIDECAR_FLAGS:-} > "$OUT/sidecar-$n.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
}

# start_haproxy N: HAProxy with N servers, checks off; sets PID and PORT.
start_haproxy() {
  local n=$1 config="$OUT/haproxy-$1.cfg"
  PORT=$((BASE_PORT + 3))
  {
    printf 'global\n  maxconn 4096\ndefaults\n  mode http\n  timeout connect 1s\n'
    printf '  timeout client 10s\n  timeout server 10s\n  http-reuse always\n'
    printf 'frontend f\n  bind 127.0.0.1:%s\n  default_backend b\nbackend b\n  balance leastconn\n' "$PORT"
    for i in $(seq 1 "$n"); do echo "  server s$i $(address "$i")"; done
  } > "$config"
  "$HAPROXY" -f "$config" -db > "$OUT/haproxy-$n.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
}

# One nginx answering 200 on every endpoint address of a pool of N.
start_endpoints() {
  local n=$1 dir="$OUT/nginx"
  mkdir -p "$dir/tmp"
  {
    echo "worker_processes 1; pid $dir/nginx.pid; error_log $dir/error.log warn;"
    echo "events { worker_connections $((n + 4000)); }"
    echo "http { access_log off; keepalive_requests 10000000; client_body_temp_path $dir/tmp;"
    echo "server {"
    for i in $(seq 1 "$n"); do echo "listen $(address "$i");"; done
    echo 'location / { return 200 "endpoint\n"; } } }'
  } > "$dir/nginx.conf"
  "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -g 'daemon on;'
}

# Established connections process $1 holds to the endpoints' port.
upstream_connections() {
  ss -tnpH state established "( dport = :$ENDPOINT_PORT )" | grep -c "pid=$1," || true
}

stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

base_n="" base_rss="" base_anon=""
largest=""
for n in $SIZES; do
  largest=$n
  start_rollcall "$n"
  wait_listening "$PORT" "$PID"
  sleep "$SETTLE"
  read -r rss anon < <(memory_kib "$PID")
  stop_pid "$PID"
  line="memory: endpoints=$n rollcall_rss_kib=$rss rollcall_anon_kib=$anon"
  if [ -z "$base_n" ]; then base_n=$n base_rss=$rss base_anon=$anon; fi
  if [ "$n" -gt "$base_n" ]; then
    line="$line rollcall_per_endpoint_bytes=$(((rss - base_rss) * 1024 / (n - base_n)))"
    line="$line rollcall_anon_per_endpoint_bytes=$(((anon - base_anon) * 1024 / (n - base_n)))"
  fi
  start_haproxy "$n"
  wait_listening "$PORT" "$PID"
  sleep "$SETTLE"
  read -r rss anon < <(memory_kib "$PID")
  stop_pid "$PID"
  echo "$line haproxy_rss_kib=$rss haproxy_anon_kib=$anon"
done

if [ "$TRAFFIC" -gt 0 ]; then
  start_endpoints "$largest"
  for proxy in rollcall haproxy; do
    "start_$proxy" "$largest"
    wait_listening "$PORT" "$PID"
    "$WRK" -t2 -c64 -d"${TRAFFIC}s" "http://127.0.0.1:$PORT/" > "$OUT/wrk-$proxy.txt" 2>&1
    read -r rss anon < <(memory_kib "$PID")
    upstream=$(upstream_connections "$PID")
    requests=$(awk '/requests in/ {print $1}' "$OUT/wrk-$proxy.txt")
    stop_pid "$PID"
    echo "memory: endpoints=$largest after_traffic_s=$TRAFFIC proxy=$proxy requests=${requests:-0} rss_kib=$rss anon_kib=$anon upstream_connections=$upstream"
  done
fi

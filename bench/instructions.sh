#!/usr/bin/env bash
# Instructions per request, counted by valgrind (callgrind): the sidecar's and HAProxy's own user
# space work for one small proxied request, the same from run to run to within about 1% however
# busy the machine is (timings on a shared 2-core machine move by 10-20%). Use it to A/B a
# request-path change; bench/run.sh measures the time.
#
# Two nginx backends, the proxy under callgrind, wrk with 8 connections: a warm-up, counters
# zeroed, DURATION of load, counters dumped; the total divided by the requests served. Kernel
# time (the same system calls per request for both: two reads, two writes) is not counted.
#   ./bench/instructions.sh
#   SIDECAR=/path/to/other/rollcall-sidecar ONLY=rollcall ./bench/instructions.sh
#   (SIDECAR_THREADS_FLAG=0 for a build from before --threads)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out/instructions"
DURATION="${DURATION:-10s}"
ONLY="${ONLY:-rollcall haproxy}"
BASE_PORT="${BASE_PORT:-19180}"
log() { printf '%s\n' "$*" >&2; }
rm -rf "$OUT"
mkdir -p "$OUT/www"
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk valgrind curl
# The sidecar as shipped (the `sidecar` profile), unless SIDECAR names another build.
if [ -z "${SKIP_BUILD:-}" ] && [ -z "${SIDECAR:-}" ]; then
  (cd "$ROOT" && cargo build --profile sidecar -p rollcall-dataplane --bin rollcall-sidecar)
fi
SIDECAR="${SIDECAR:-$ROOT/target/sidecar/rollcall-sidecar}"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_up() {
  for _ in $(seq 1 300); do
    curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$1/small" && return 0
    sleep 0.2
  done
  log "nothing answers on 127.0.0.1:$1"
  return 1
}

printf 'backend small\n' > "$OUT/www/small"
B1=$((BASE_PORT + 1)) B2=$((BASE_PORT + 2)) PROXY=$((BASE_PORT + 10))
for port in "$B1" "$B2"; do
  dir="$OUT/backend-$port"
  mkdir -p "$dir/tmp"
  cat > "$dir/nginx.conf" <<EOF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/tmp;
    keepalive_requests 10000000;
    server { listen 127.0.0.1:$port; root $OUT/www; }
}
EOF
  "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" -g 'daemon off;' &
  PIDS+=("$!")
  wait_up "$port"
done

cat > "$OUT/rollcall.yaml" <<EOF
pools:
- name: bench
  listen: "127.0.0.1:$PROXY"
  endpoints: [{address: "127.0.0.1:$B1"}, {address: "127.0.0.1:$B2"}]
  policy: {}
EOF
# HAProxy adds the forwarding fields the sidecar adds, so both hand the backends the same request
# (FORWARDING_FIELDS=0: without them, as results before 2026-12-07 05:30 were measured). The
# cheapest rules that do it for this load (wrk sends none of these fields): unconditional ones;
# the sidecar's rule (set -Proto and -Host only when the client did not) cost HAProxy about
# 1,500 instructions more per request as ACLs.
FORWARDING=""
if [ "${FORWARDING_FIELDS:-1}" != 0 ]; then
  FORWARDING='    option forwardfor
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
'
fi
cat > "$OUT/haproxy.cfg" <<EOF
global
    maxconn 4096
    nbthread 1
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
    http-reuse always
frontend bench
    bind 127.0.0.1:$PROXY
    default_backend backends
backend backends
    balance leastconn
$FORWARDING    server b1 127.0.0.1:$B1 check inter 2s
    server b2 127.0.0.1:$B2 check inter 2s
EOF

# count NAME CMD...: instructions per request of CMD under callgrind.
count() {
  local name=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.$name" "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  wait_up "$PROXY"
  "$WRK" -t1 -c8 -d3s "http://127.0.0.1:$PROXY/small" > /dev/null
  callgrind_control -z "$pid" > /dev/null 2>&1
  "$WRK" -t1 -c8 -d"$DURATION" "http://127.0.0.1:$PROXY/small" > "$OUT/wrk-$name.txt"
  callgrind_control -d "$pid" > /dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local requests total
  requests=$(awk '/requests in/ {print $1}' "$OUT/wrk-$name.txt")
  total=$(callgrind_annotate "$OUT/callgrind.$name.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  if [ -z "$total" ] || [ -z "$requests" ] || [ "$requests" = 0 ]; then
    log "no count for $name; see $OUT/$name.log"
    return 1
  fi
  echo "instructions: proxy=$name requests=$requests per_request=$((total / requests))"
}

for name in $ONLY; do
  case $name in
    rollcall)
      # SIDECAR_THREADS_FLAG=0 for a build from before --threads.
      threads=(--threads 1)
      [ "${SIDECAR_THREADS_FLAG:-1}" = 0 ] && threads=()
      ROLLCALL_LOG=warn count rollcall "$SIDECAR" --config "$OUT/rollcall.yaml" \
        --admin-listen "127.0.0.1:$((BASE_PORT + 11))" "${threads[@]}" ;;
    haproxy) count haproxy "$HAPROXY" -db -f "$OUT/haproxy.cfg" ;;
  esac
done

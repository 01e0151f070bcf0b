#!/usr/bin/env bash
# Instructions per request, counted by valgrind (callgrind): the sidecar's and HAProxy's own user
# space work for one small proxied request, the same from run to run to within about 1% however
# busy the machine is (timings on a shared 2-core machine move by 10-20%). Use it to A/B a
# request-path change; bench/run.sh measures the time.
#
# Two nginx backends, the proxy under callgrind, wrk with 8 connections: a warm-up, counters
# zeroed, DURATION of load, counters dumped; the total divided by the requests served. Kernel
# time is not counted: COUNT=syscalls counts it instead, as system calls per request by name
# (strace -c attached to every thread of the proxy after the warm-up; the proxy runs at a
# fraction of its speed while traced, so only the counts mean anything, not the times).
#   ./bench/instructions.sh
#   COUNT=syscalls BODY=16k ./bench/instructions.sh   # system calls, 16 KiB answers
#   SIDECAR=/path/to/other/rollcall-sidecar ONLY=rollcall ./bench/instructions.sh
#   (SIDECAR_THREADS_FLAG=0 for a build from before --threads)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out/instructions"
DURATION="${DURATION:-10s}"
ONLY="${ONLY:-rollcall haproxy}"
COUNT="${COUNT:-instructions}"
BODY="${BODY:-small}"
BASE_PORT="${BASE_PORT:-19180}"
log() { printf '%s\n' "$*" >&2; }
rm -rf "$OUT"
mkdir -p "$OUT/www"
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk valgrind curl
case $COUNT in
  instructions) ;;
  syscalls) command -v strace > /dev/null || { log "COUNT=syscalls needs strace (apt-get install strace)"; exit 1; } ;;
  *) log "COUNT is instructions or syscalls, not $COUNT"; exit 1 ;;
esac
case $BODY in small | 16k) ;; *) log "BODY is small or 16k, not $BODY"; exit 1 ;; esac
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
head -c 16384 /dev/zero | tr '\0' x > "$OUT/www/16k"
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

# count NAME CMD...: instructions (or system calls) per request of CMD.
count() {
  case $COUNT in
    instructions) count_instructions "$@" ;;
    syscalls) count_syscalls "$@" ;;
  esac
}

# served NAME: the requests wrk counted in NAME's measured run.
served() {
  awk '/requests in/ {print $1}' "$OUT/wrk-$1.txt"
}

count_instructions() {
  local name=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.$name" "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  wait_up "$PROXY"
  "$WRK" -t1 -c8 -d3s "http://127.0.0.1:$PROXY/$BODY" > /dev/null
  callgrind_control -z "$pid" > /dev/null 2>&1
  "$WRK" -t1 -c8 -d"$DURATION" "http://127.0.0.1:$PROXY/$BODY" > "$OUT/wrk-$name.txt"
  callgrind_control -d "$pid" > /dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local requests total
  requests=$(served "$name")
  total=$(callgrind_annotate "$OUT/callgrind.$name.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  if [ -z "$total" ] || [ -z "$requests" ] || [ "$requests" = 0 ]; then
    log "no count for $name; see $OUT/$name.log"
    return 1
  fi
  echo "instructions: proxy=$name body=$BODY requests=$requests per_request=$((total / requests))"
}

count_syscalls() {
  local name=$1
  shift
  "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  wait_up "$PROXY"
  "$WRK" -t1 -c8 -d3s "http://127.0.0.1:$PROXY/$BODY" > /dev/null
  # -f with the process: strace attaches every thread it has, and says so in one line.
  : > "$OUT/strace-$name.log"
  strace -c -f -o "$OUT/strace-$name.txt" -p "$pid" 2> "$OUT/strace-$name.log" &
  local tracer=$!
  PIDS+=("$tracer")
  for _ in $(seq 1 100); do
    grep -q "Process $pid attached" "$OUT/strace-$name.log" && break
    kill -0 "$tracer" 2> /dev/null || break
    sleep 0.1
  done
  if ! grep -q "Process $pid attached" "$OUT/strace-$name.log"; then
    log "strace could not attach to $name (ptrace not permitted?); see $OUT/strace-$name.log"
    return 1
  fi
  "$WRK" -t1 -c8 -d"$DURATION" "http://127.0.0.1:$PROXY/$BODY" > "$OUT/wrk-$name.txt"
  kill -INT "$tracer" 2> /dev/null || true
  wait "$tracer" 2>/dev/null || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local requests
  requests=$(served "$name")
  if [ -z "$requests" ] || [ "$requests" = 0 ] || [ ! -s "$OUT/strace-$name.txt" ]; then
    log "no count for $name; see $OUT/strace-$name.log"
    return 1
  fi
  # strace -c: "% time, seconds, usecs/call, calls, [errors,] syscall", then a "total" line.
  awk -v proxy="$name" -v body="$BODY" -v requests="$requests" '
    $NF == "total" { printf "syscalls: proxy=%s body=%s requests=%d per_request=%.2f\n", proxy, body, requests, $4 / requests; next }
    $1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ && $4 / requests >= 0.01 {
      printf "syscalls: proxy=%s body=%s call=%s per_request=%.2f\n", proxy, body, $NF, $4 / requests }
  ' "$OUT/strace-$name.txt"
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

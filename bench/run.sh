#!/usr/bin/env bash
# Proxy overhead: rollcall-sidecar against HAProxy and nginx, same backends, same load, one run.
#
# Starts three rollcall-demo-backend processes, then one proxy at a time (direct, rollcall,
# haproxy, nginx) on 127.0.0.1, loads each with wrk and prints requests/s, p50 and p99 with the
# ratios rollcall/haproxy and rollcall/nginx. Everything it writes goes to bench/out/; every
# process it starts is stopped on exit. See bench/README.md for how to read the numbers.
#
# Environment: DURATION (10s), CONNECTIONS (64), THREADS (2, wrk threads), WARMUP (2s),
# BASE_PORT (18080), ONLY (e.g. "direct haproxy"), SKIP_BUILD=1 (reuse target/release),
# ROUNDS (1; with more, the proxies take turns and each keeps its best round).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/bench/out"
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-64}"
THREADS="${THREADS:-2}"
WARMUP="${WARMUP:-2s}"
BASE_PORT="${BASE_PORT:-18080}"
ONLY="${ONLY:-direct rollcall haproxy nginx}"
ROUNDS="${ROUNDS:-1}"
BIN="$ROOT/target/release"

B1=$((BASE_PORT + 1)) B2=$((BASE_PORT + 2)) B3=$((BASE_PORT + 3))
P_ROLLCALL=$((BASE_PORT + 10)) P_ADMIN=$((BASE_PORT + 11))
P_HAPROXY=$((BASE_PORT + 12)) P_NGINX=$((BASE_PORT + 13))

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s\n' "$*" >&2; }

# --- tools ---------------------------------------------------------------------------------
# shellcheck source=bench/tools.sh
. "$ROOT/bench/tools.sh"
need_tools nginx haproxy wrk curl

# --- build ---------------------------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building release binaries (cargo build --release --bins)"
    if ! (cd "$ROOT" && cargo build --release --bins); then
        # Measure what can be measured: the backends are required, the sidecar is not.
        log "the workspace does not build; building the backends and the sidecar on their own"
        (cd "$ROOT" && cargo build --release -p rollcall-testkit --bins)
        (cd "$ROOT" && cargo build --release -p rollcall-dataplane --bins) || SIDECAR_BROKEN=1
    fi
fi
[ -x "$BIN/rollcall-demo-backend" ] || { log "missing $BIN/rollcall-demo-backend"; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/nginx/tmp"

# --- helpers -------------------------------------------------------------------------------
# wait_up PORT PID: true once GET / through PORT answers 200, false if PID dies or 10 s pass.
wait_up() {
    local port="$1" pid="$2"
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 1
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}

stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# to_ms VALUE: wrk's "310.00us" / "1.20ms" / "1.05s" in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.3f", n }'
}

declare -A RPS P50 P99 ERRS CPU

# cpu_ticks PID: CPU time (user + system, clock ticks) of PID and its direct children, so
# nginx's workers count with their master.
cpu_ticks() {
    local pid="$1" total=0 f stat rest
    for f in /proc/[0-9]*/stat; do
        stat="$(cat "$f" 2>/dev/null)" || continue
        rest="${stat##*) }"
        # After the command: state ppid ... utime(12th) stime(13th) of what follows.
        set -- $rest
        if [ "${f#/proc/}" = "$pid/stat" ] || [ "$2" = "$pid" ]; then
            total=$((total + ${12} + ${13}))
        fi
    done
    echo "$total"
}

# measure NAME PORT ROUND PID: warm up, then load with wrk; keeps the best round (noise only
# slows). Also records the proxy's CPU time per request, a figure less sensitive to what else
# the machine is doing than requests/s.
measure() {
    local name="$1" port="$2" file="$OUT/wrk-$1-round$3.txt" pid="$4"
    "$WRK" -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
    local before after
    before="$(cpu_ticks "$pid")"
    "$WRK" -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$port/" >"$file" 2>&1
    after="$(cpu_ticks "$pid")"
    local rps p50 p99 errs cpu requests
    rps="$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$file")"
    p50="$(to_ms "$(awk '$1 == "50%" {print $2}' "$file")")"
    p99="$(to_ms "$(awk '$1 == "99%" {print $2}' "$file")")"
    errs="$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$file")"
    requests="$(awk '/requests in/ {print $1}' "$file")"
    cpu="$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="${requests:-0}" \
        'BEGIN { if (n > 0 && t > 0) printf "%.1f", t / hz * 1e6 / n; else print "n/a" }')"
    log "  $name: ${rps:-?} req/s, p50 $p50 ms, p99 $p99 ms, errors $errs, proxy CPU ${cpu} us/request"
    if [ -n "$rps" ] && [ "$rps" -gt "${RPS[$name]:-0}" ]; then
        RPS[$name]="$rps" P50[$name]="$p50" P99[$name]="$p99" ERRS[$name]="$errs" CPU[$name]="$cpu"
    fi
}

declare -A SKIPPED
# run NAME PORT CMD...: start CMD in the background, measure through PORT, stop it.
run() {
    local name="$1" port="$2"
    shift 2
    case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
    log "$name: starting on 127.0.0.1:$port"
    "$@" >"$OUT/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    if ! wait_up "$port" "$pid"; then
        log "SKIPPED $name: it did not answer 200 on 127.0.0.1:$port within 10 s; end of $OUT/$name.log:"
        tail -n 15 "$OUT/$name.log" >&2 || true
        SKIPPED[$name]="did not come up, see bench/out/$name.log"
        stop "$pid"
        return 0
    fi
    measure "$name" "$port" "$ROUND" "$pid"
    stop "$pid"
}

# --- backends ------------------------------------------------------------------------------
declare -A BACKEND_PID
for port in "$B1" "$B2" "$B3"; do
    "$BIN/rollcall-demo-backend" --listen "127.0.0.1:$port" >"$OUT/backend-$port.log" 2>&1 &
    BACKEND_PID[$port]=$!
    PIDS+=("$!")
done
for port in "$B1" "$B2" "$B3"; do
    wait_up "$port" "${BACKEND_PID[$port]}" || {
        log "the backend on 127.0.0.1:$port did not come up:"
        cat "$OUT/backend-$port.log" >&2
        exit 1
    }
done

# --- configs -------------------------------------------------------------------------------
cat >"$OUT/rollcall.yaml" <<EOF
pools:
- name: bench
  listen: "127.0.0.1:$P_ROLLCALL"
  endpoints:
  - {address: "127.0.0.1:$B1", zone: a, weight: 1, terminating: false}
  - {address: "127.0.0.1:$B2", zone: a, weight: 1, terminating: false}
  - {address: "127.0.0.1:$B3", zone: a, weight: 1, terminating: false}
  policy: {}
EOF

cat >"$OUT/haproxy.cfg" <<EOF
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
    http-reuse always
frontend bench
    bind 127.0.0.1:$P_HAPROXY
    default_backend backends
backend backends
    balance leastconn
    server b1 127.0.0.1:$B1 check inter 2s
    server b2 127.0.0.1:$B2 check inter 2s
    server b3 127.0.0.1:$B3 check inter 2s
EOF

cat >"$OUT/nginx/nginx.conf" <<EOF
worker_processes auto;
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $OUT/nginx/tmp/body;
    proxy_temp_path $OUT/nginx/tmp/proxy;
    fastcgi_temp_path $OUT/nginx/tmp/fastcgi;
    uwsgi_temp_path $OUT/nginx/tmp/uwsgi;
    scgi_temp_path $OUT/nginx/tmp/scgi;
    upstream backends {
        least_conn;
        server 127.0.0.1:$B1;
        server 127.0.0.1:$B2;
        server 127.0.0.1:$B3;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:$P_NGINX;
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF

# --- runs ----------------------------------------------------------------------------------
log "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency (after a $WARMUP warm-up), one proxy at a time"
for ROUND in $(seq 1 "$ROUNDS"); do
    [ "$ROUNDS" = 1 ] || log "round $ROUND of $ROUNDS"
    run direct "$B1" sleep infinity
    if [ -x "$BIN/rollcall-sidecar" ] && [ "${SIDECAR_BROKEN:-0}" != 1 ]; then
        run rollcall "$P_ROLLCALL" env ROLLCALL_LOG=warn "$BIN/rollcall-sidecar" \
            --config "$OUT/rollcall.yaml" --admin-listen "127.0.0.1:$P_ADMIN"
    else
        case " $ONLY " in *" rollcall "*)
            log "SKIPPED rollcall: $BIN/rollcall-sidecar did not build"
            SKIPPED[rollcall]="did not build" ;;
        esac
    fi
    run haproxy "$P_HAPROXY" "$HAPROXY" -db -f "$OUT/haproxy.cfg"
    run nginx "$P_NGINX" "$NGINX" -p "$OUT/nginx" -e "$OUT/nginx/error.log" \
        -c "$OUT/nginx/nginx.conf" -g "daemon off;"
done

# --- table ---------------------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
{
    echo "rollcall proxy benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "tools: $("$NGINX" -v 2>&1 | sed 's/.*: //'), $("$HAPROXY" -v | awk 'NR==1 {print "haproxy " $3}'), $("$WRK" -v 2>&1 | awk 'NR==1 {print $1, $2}')"
    echo "load: wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, GET / (tiny body), 3 backends, keep-alive, best of $ROUNDS round(s)"
    echo
    printf '%-10s %12s %10s %10s %8s %14s\n' proxy "requests/s" "p50 ms" "p99 ms" errors "CPU us/req"
    for name in direct rollcall haproxy nginx; do
        if [ -n "${RPS[$name]:-}" ]; then
            printf '%-10s %12s %10s %10s %8s %14s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "${ERRS[$name]}" "${CPU[$name]}"
        elif [ -n "${SKIPPED[$name]:-}" ]; then
            printf '%-10s  skipped: %s\n' "$name" "${SKIPPED[$name]}"
        fi
    done
    echo
    for other in haproxy nginx; do
        echo "rollcall vs $other: throughput $(ratio "${RPS[rollcall]:-}" "${RPS[$other]:-}"), p99 $(ratio "${P99[rollcall]:-}" "${P99[$other]:-}"), CPU per request $(ratio "${CPU[rollcall]:-}" "${CPU[$other]:-}")"
    done
    echo "(throughput above 1x, p99 and CPU per request below 1x favour rollcall; n/a when a side did not run)"
} | tee "$OUT/results.txt"

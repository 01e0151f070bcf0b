#!/usr/bin/env python3
"""Proxy overhead: rollcall-sidecar against HAProxy and nginx, same backends, same load, one run.

Driven by bench/run.sh (which installs the tools and builds); see bench/README.md for how to read
the output. Two nginx backends serve a small body (`/small`, 14 bytes) and a 16 KiB one (`/16k`);
each proxy in turn forwards wrk's keep-alive load to them. Modes:

  pinned    the proxy alone on CPU 0 with one thread; wrk and the backends on CPU 1
  shared-1  nothing pinned, every proxy with one thread
  shared-2  nothing pinned, every proxy with two threads

Rounds are interleaved (round 1 of every proxy, then round 2 ...), so a burst of load from
elsewhere hits every proxy alike; the table shows the median of the rounds and their min-max.
Per run: requests/s, p50 and p99 (wrk), the proxy's CPU time per request, the backends' CPU time
per request, and the proxy's resident memory at the end of the run. Only 127.0.0.1 is used and
every process started is stopped on exit.
"""

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
# The sidecar as the image ships it (Cargo.toml's `sidecar` profile); SIDECAR= another build.
SIDECAR = os.environ.get("SIDECAR") or os.path.join(ROOT, "target", "sidecar", "rollcall-sidecar")

DURATION = os.environ.get("DURATION", "5s")
WARMUP = os.environ.get("WARMUP", "1s")
CONNECTIONS = int(os.environ.get("CONNECTIONS", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
BASE_PORT = int(os.environ.get("BASE_PORT", "18080"))
MODES = os.environ.get("MODES", "pinned shared-1 shared-2").split()
BODIES = os.environ.get("BODIES", "small 16k").split()
ONLY = os.environ.get("ONLY", "direct rollcall before haproxy nginx").split()
SIDECAR_ARGS = os.environ.get("SIDECAR_ARGS", "").split()
# SIDECAR_THREADS_FLAG=0: a sidecar from before `--threads` (it then picks its own threads).
THREADS_FLAG = os.environ.get("SIDECAR_THREADS_FLAG", "1") != "0"
# HAProxy and nginx add the forwarding fields the sidecar adds (X-Forwarded-For, -Proto, -Host)
# and pass the client's Host as it does, so every proxy hands the backends the same request;
# FORWARDING_FIELDS=0 leaves them out (the setup of results before 2026-12-07 05:30). HAProxy's
# rules are the cheapest that do it for this load (wrk sends none of these fields):
# unconditional, not the sidecar's "only when the client did not", which costs HAProxy more as
# ACLs.
FORWARDING_FIELDS = os.environ.get("FORWARDING_FIELDS", "1") != "0"
HAPROXY_FORWARDING = """    option forwardfor
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
"""
NGINX_FORWARDING = """            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
"""
# BEFORE=/path/to/rollcall-sidecar: a second sidecar build in the same run (row `before`), for an
# A/B of a change; BEFORE_THREADS_FLAG=0 when it predates `--threads`.
BEFORE = os.environ.get("BEFORE")
BEFORE_THREADS_FLAG = os.environ.get("BEFORE_THREADS_FLAG", "1") != "0"
PROXIES = ["direct", "rollcall"] + (["before"] if BEFORE else []) + ["haproxy", "nginx"]

NGINX = shutil.which("nginx", path=os.environ["PATH"] + ":/usr/sbin:/sbin")
HAPROXY = shutil.which("haproxy", path=os.environ["PATH"] + ":/usr/sbin:/sbin")
WRK = shutil.which("wrk")
TASKSET = shutil.which("taskset")

BACKENDS = [BASE_PORT + 1, BASE_PORT + 2]
PORTS = {"rollcall": BASE_PORT + 10, "haproxy": BASE_PORT + 12, "nginx": BASE_PORT + 13,
         "before": BASE_PORT + 14}
ADMIN = {"rollcall": BASE_PORT + 11, "before": BASE_PORT + 15}
PATHS = {"small": "/small", "16k": "/16k"}
BODY_BYTES = {"small": 14, "16k": 16384}
CLK_TCK = os.sysconf("SC_CLK_TCK")
PROXY_CPU, LOAD_CPU = "0", "1"

running = []


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def mode_threads(mode):
    return 2 if mode == "shared-2" else 1


def pinned(mode, cpu, cmd):
    return [TASKSET, "-c", cpu] + cmd if mode == "pinned" else cmd


def start(cmd, logname):
    out = open(os.path.join(OUT, logname), "w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    running.append(proc)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in running:
        running.remove(proc)


def stop_all(*_):
    for proc in list(running):
        stop(proc)
    sys.exit(130)


def wait_up(port, proc, path="/small"):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def tree(pid):
    """pid and its direct children (nginx's workers count with their master)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                pids.append(int(entry))
    return pids


def cpu_split(pids):
    """(user, kernel) CPU seconds the processes have used so far."""
    user = kernel = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])
            kernel += int(fields[12])
        except OSError:
            pass
    return user / CLK_TCK, kernel / CLK_TCK


def cpu_seconds(pids):
    return sum(cpu_split(pids))


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                m = re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M)
            total += int(m.group(1)) if m else 0
        except OSError:
            pass
    return total


def to_ms(value):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", value)
    if not m:
        return float("nan")
    n, unit = float(m.group(1)), m.group(2)
    return {"us": n / 1000, "ms": n, "s": n * 1000, "m": n * 60000}[unit]


def wrk(mode, port, path, duration, latency, outfile=None):
    threads = "1" if mode == "pinned" else "2"
    cmd = [WRK, f"-t{threads}", f"-c{CONNECTIONS}", f"-d{duration}"]
    if latency:
        cmd.append("--latency")
    cmd.append(f"http://127.0.0.1:{port}{path}")
    out = subprocess.run(pinned(mode, LOAD_CPU, cmd), capture_output=True, text=True).stdout
    if outfile:
        with open(outfile, "w") as f:
            f.write(out)
    return out


def wrk_errors(out):
    """Non-2xx answers and socket errors in wrk's output."""
    errors = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses:\s+(\d+)", out))
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if sock:
        errors += sum(int(x) for x in sock.groups())
    return errors


def start_backends(mode):
    """The two nginx backends (on the load CPU when pinned), or None if one did not come up."""
    backends = []
    for port in BACKENDS:
        d = os.path.join(OUT, f"backend-{port}")
        cmd = [NGINX, "-p", d, "-e", os.path.join(d, "error.log"),
               "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"]
        proc = start(pinned(mode, LOAD_CPU, cmd), f"backend-{port}.log")
        if not wait_up(port, proc):
            log(f"the backend on 127.0.0.1:{port} did not come up; see {OUT}")
            return None
        backends.append(proc)
    return backends


def measure(mode, body, name, port, proxy, backend_pids, round_no):
    path = PATHS[body]
    wrk(mode, port, path, WARMUP, False)
    proxy_pids = tree(proxy.pid) if proxy else []
    before_proxy, before_backends = cpu_split(proxy_pids), cpu_seconds(backend_pids)
    out = wrk(mode, port, path, DURATION, True,
              os.path.join(OUT, f"wrk-{mode}-{body}-{name}-round{round_no}.txt"))
    after_proxy = cpu_split(proxy_pids)
    proxy_user = after_proxy[0] - before_proxy[0]
    proxy_kernel = after_proxy[1] - before_proxy[1]
    proxy_cpu = proxy_user + proxy_kernel
    backend_cpu = cpu_seconds(backend_pids) - before_backends
    rss = rss_kib(proxy_pids) if proxy else None
    requests = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    if not (requests and rps and p50 and p99):
        log(f"  {name}: wrk gave no result; see bench/out")
        return None
    n = int(requests.group(1))
    errors = wrk_errors(out)
    result = {
        "round": round_no,
        "rps": float(rps.group(1)),
        "p50": to_ms(p50.group(1)),
        "p99": to_ms(p99.group(1)),
        "errors": errors,
        "proxy_us": proxy_cpu * 1e6 / n if proxy and n else None,
        # The kernel's share (system calls, TCP), to tell a gap in our code from one below it.
        "proxy_kernel_us": proxy_kernel * 1e6 / n if proxy and n else None,
        "backend_us": backend_cpu * 1e6 / n if n else None,
        "rss_mib": rss / 1024 if rss is not None else None,
    }
    log(f"  {mode} {body} {name}: {result['rps']:.0f} req/s, p99 {result['p99']:.2f} ms, "
        f"proxy {fmt(result['proxy_us'], 1)} us/req ({fmt(result['proxy_kernel_us'], 1)} in the kernel), backends {fmt(result['backend_us'], 1)} us/req, "
        f"errors {errors}")
    return result


def fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def write_configs():
    www = os.path.join(OUT, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "small"), "w") as f:
        f.write("backend small\n")
    with open(os.path.join(www, "16k"), "wb") as f:
        f.write(bytes((i * 7) % 251 for i in range(16384)))
    for port in BACKENDS:
        d = os.path.join(OUT, f"backend-{port}")
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"""worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {www};
    }}
}}
""")


def proxy_command(name, mode):
    threads = mode_threads(mode)
    if name in ("rollcall", "before"):
        path = os.path.join(OUT, f"{name}.yaml")
        with open(path, "w") as f:
            f.write("pools:\n- name: bench\n")
            f.write(f"  listen: \"127.0.0.1:{PORTS[name]}\"\n  endpoints:\n")
            for port in BACKENDS:
                f.write(f"  - {{address: \"127.0.0.1:{port}\"}}\n")
            f.write("  policy: {}\n")
        binary, flag = (SIDECAR, THREADS_FLAG) if name == "rollcall" else (BEFORE, BEFORE_THREADS_FLAG)
        threads_flag = ["--threads", str(threads)] if flag else []
        return ["env", "ROLLCALL_LOG=warn", binary,
                "--config", path, "--admin-listen", f"127.0.0.1:{ADMIN[name]}"] + threads_flag + SIDECAR_ARGS
    if name == "haproxy":
        path = os.path.join(OUT, "haproxy.cfg")
        servers = "\n".join(f"    server b{i} 127.0.0.1:{p} check inter 2s"
                            for i, p in enumerate(BACKENDS, 1))
        forwarding = HAPROXY_FORWARDING if FORWARDING_FIELDS else ""
        with open(path, "w") as f:
            f.write(f"""global
    maxconn 4096
    nbthread {threads}
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
    http-reuse always
frontend bench
    bind 127.0.0.1:{PORTS['haproxy']}
    default_backend backends
backend backends
    balance leastconn
{forwarding}{servers}
""")
        return [HAPROXY, "-db", "-f", path]
    d = os.path.join(OUT, "nginx")
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in BACKENDS)
    forwarding = NGINX_FORWARDING if FORWARDING_FIELDS else ""
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"""worker_processes {threads};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    upstream backends {{
        least_conn;
{servers}
        keepalive 64;
        keepalive_requests 10000000;
    }}
    server {{
        listen 127.0.0.1:{PORTS['nginx']};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
{forwarding}            proxy_buffer_size 16k;
            proxy_buffers 8 16k;
        }}
    }}
}}
""")
    return [NGINX, "-p", d, "-e", os.path.join(d, "error.log"), "-c", path, "-g", "daemon off;"]


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(values, digits):
    s = summary(values)
    if s is None:
        return "-"
    med, lo, hi = s
    return f"{med:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def paired(a, b, key):
    """Round-by-round ratios of `key`, a over b: each round ran both proxies back to back, so a
    pair saw the same machine, while the medians above mix rounds minutes apart. Median
    (min-max) of the ratios, and in how many rounds a was below b."""
    others = {y["round"]: y for y in b}
    pairs = [(x[key], others[x["round"]][key]) for x in a
             if x["round"] in others
             and x.get(key) is not None and others[x["round"]].get(key) not in (None, 0)]
    if not pairs:
        return "n/a"
    rs = [x / y for x, y in pairs]
    below = sum(r < 1 for r in rs)
    return f"{statistics.median(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f}; below 1 in {below} of {len(rs)})"


def ratio(a, b):
    sa, sb = summary(a), summary(b)
    if sa is None or sb is None or sb[0] == 0:
        return "n/a"
    return f"{sa[0] / sb[0]:.2f}x"


def main():
    for tool, name in ((NGINX, "nginx"), (HAPROXY, "haproxy"), (WRK, "wrk"), (TASKSET, "taskset")):
        if not tool:
            log(f"{name} is missing (bench/run.sh installs it)")
            return 1
    if "pinned" in MODES and os.cpu_count() < 2:
        log("pinned mode needs two CPUs; skipping it")
        MODES.remove("pinned")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    write_configs()
    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    results = {}
    skipped = {}
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        for mode in MODES:
            backends = start_backends(mode)
            if backends is None:
                return 1
            backend_pids = [p for proc in backends for p in tree(proc.pid)]
            for round_no in range(1, ROUNDS + 1):
                log(f"mode {mode}, round {round_no} of {ROUNDS}")
                for name in PROXIES:
                    if name not in ONLY:
                        continue
                    proxy, port = None, BACKENDS[0]
                    if name != "direct":
                        port = PORTS[name]
                        proxy = start(pinned(mode, PROXY_CPU, proxy_command(name, mode)),
                                      f"{name}-{mode}.log")
                        if not wait_up(port, proxy):
                            skipped[name] = f"did not come up, see bench/out/{name}-{mode}.log"
                            log(f"SKIPPED {name} in {mode}: {skipped[name]}")
                            stop(proxy)
                            continue
                    for body in BODIES:
                        r = measure(mode, body, name, port, proxy, backend_pids, round_no)
                        if r:
                            results.setdefault((mode, body, name), []).append(r)
                    if proxy:
                        stop(proxy)
            for proc in backends:
                stop(proc)
    finally:
        for proc in list(running):
            stop(proc)

    lines = [f"rollcall proxy benchmark, {started}",
             f"machine: {os.cpu_count()} CPUs, {cpu_model()}, load average {loadavg()}",
             f"tools: {versions()}",
             f"load: wrk -c{CONNECTIONS} -d{DURATION} --latency after a {WARMUP} warm-up, keep-alive, "
             f"2 nginx backends (1 worker each); median (min-max) of {ROUNDS} interleaved round(s)",
             ""]
    headers = ["proxy", "requests/s", "p50 ms", "p99 ms", "proxy CPU us/req",
               "of it kernel", "backend CPU us/req", "proxy RSS MiB", "errors"]
    for mode in MODES:
        for body in BODIES:
            desc = {"pinned": "proxy pinned to CPU 0 with 1 thread, wrk and backends on CPU 1",
                    "shared-1": "nothing pinned, proxies with 1 thread",
                    "shared-2": "nothing pinned, proxies with 2 threads"}.get(mode, mode)
            lines.append(f"== {mode}: {desc}; body {body} ({BODY_BYTES[body]} bytes)")
            rows = [headers]
            for name in PROXIES:
                runs = results.get((mode, body, name))
                if not runs:
                    if name in skipped:
                        rows.append([name, "skipped: " + skipped[name]])
                    continue
                rows.append([name,
                             cell([r["rps"] for r in runs], 0),
                             cell([r["p50"] for r in runs], 2),
                             cell([r["p99"] for r in runs], 2),
                             cell([r["proxy_us"] for r in runs], 1),
                             cell([r["proxy_kernel_us"] for r in runs], 1),
                             cell([r["backend_us"] for r in runs], 1),
                             cell([r["rss_mib"] for r in runs], 1),
                             str(sum(r["errors"] for r in runs))])
            widths = [max(len(r[i]) for r in rows if len(r) > i) for i in range(len(headers))]
            for row in rows:
                if len(row) == 2:
                    lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
                else:
                    lines.append("  ".join(c.rjust(w) if i else c.ljust(w)
                                           for i, (c, w) in enumerate(zip(row, widths))))
            rc = results.get((mode, body, "rollcall"))
            for other in ("before", "haproxy", "nginx"):
                ro = results.get((mode, body, other))
                if rc and ro:
                    def col(key, rs):
                        return [r[key] for r in rs]
                    lines.append(
                        f"rollcall vs {other}: throughput {ratio(col('rps', rc), col('rps', ro))}, "
                        f"p99 {ratio(col('p99', rc), col('p99', ro))}, "
                        f"CPU/request {ratio(col('proxy_us', rc), col('proxy_us', ro))} "
                        f"(kernel {ratio(col('proxy_kernel_us', rc), col('proxy_kernel_us', ro))}), "
                        f"backend CPU/request {ratio(col('backend_us', rc), col('backend_us', ro))}, "
                        f"RSS {ratio(col('rss_mib', rc), col('rss_mib', ro))}")
                    lines.append(
                        f"  round by round: throughput {paired(rc, ro, 'rps')}, "
                        f"p99 {paired(rc, ro, 'p99')}, "
                        f"CPU/request {paired(rc, ro, 'proxy_us')}")
            lines.append("")
    lines.append("(throughput above 1x, and p99, CPU per request and RSS below 1x, favour rollcall)")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(OUT, "results.txt"), "w") as f:
        f.write(text + "\n")
    return 0


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
    return m.group(1) if m else "unknown CPU"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def versions():
    nginx = subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr.strip()
    haproxy = subprocess.run([HAPROXY, "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    wrk_v = subprocess.run([WRK, "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    return ", ".join([nginx.split(": ")[-1], " ".join(haproxy.split()[:3]), " ".join(wrk_v.split()[:2])])


if __name__ == "__main__":
    sys.exit(main())

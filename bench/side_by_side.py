#!/usr/bin/env python3
"""CPU per request of the sidecar and HAProxy measured at the same time, on the same CPU.

Driven by bench/side_by_side.sh. bench/run.sh runs one proxy after the other, and on a shared VM
the machine changes between two runs seconds apart: there the per-round CPU ratio of two proxies
at parity spreads from about 0.75 to 1.3, wider than the differences worth measuring. Here both
proxies run at once, pinned to CPU 0 with one thread each, each under its own wrk (CONNECTIONS
each) for DURATION, with the two nginx backends and both wrk on CPU 1: whatever slows the
machine slows both in the same seconds, so the ratio of their CPU time per request (user and
system, from /proc, over the same interval) is steadier. Throughput and latency are not compared
(the two share one CPU by the scheduler's choice); bench/run.sh measures those.

Each round prints both proxies' CPU per request and the ratio; the summary gives the median ratio,
its range, and in how many rounds the sidecar's figure was the lower. Only 127.0.0.1 is used and
every process started is stopped on exit.
"""

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys

import proxybench as pb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pb.OUT = os.path.join(ROOT, "bench", "out", "side-by-side")
# Even, so each proxy starts first in as many rounds as the other.
ROUNDS = int(os.environ.get("ROUNDS", "8"))
DURATION = os.environ.get("DURATION", "5s")
WARMUP = os.environ.get("WARMUP", "1s")
CONNECTIONS = int(os.environ.get("CONNECTIONS", "32"))
BODIES = os.environ.get("BODIES", "small 16k").split()
OTHER = os.environ.get("OTHER", "haproxy")


def wrk(port, path, duration, outfile=None):
    """wrk on the load CPU against 127.0.0.1:port, as a running process (stopped with the rest
    on exit: it is in proxybench's list of running processes until `finish` takes it off)."""
    cmd = [pb.TASKSET, "-c", pb.LOAD_CPU, pb.WRK, "-t1", f"-c{CONNECTIONS}", f"-d{duration}",
           f"http://127.0.0.1:{port}{path}"]
    if outfile:
        with open(outfile, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    pb.running.append(proc)
    return proc


def finish(procs):
    for proc in procs:
        proc.wait()
        if proc in pb.running:
            pb.running.remove(proc)


def requests_served(path):
    """Requests wrk saw answered, and its errors (proxybench's count)."""
    with open(path) as f:
        text = f.read()
    served = re.search(r"(\d+) requests in", text)
    return (int(served.group(1)) if served else 0), pb.wrk_errors(text)


def one_round(body, proxies, round_no):
    """Both proxies under load at once; CPU microseconds per request of each, or None."""
    path = pb.PATHS[body]
    names = list(proxies)
    finish([wrk(pb.PORTS[name], path, WARMUP) for name in names])
    pids = {name: pb.tree(proxies[name].pid) for name in names}
    before = {name: pb.cpu_seconds(p) for name, p in pids.items()}
    outs = {name: os.path.join(pb.OUT, f"wrk-{body}-{name}-round{round_no}.txt") for name in names}
    finish([wrk(pb.PORTS[name], path, DURATION, outs[name]) for name in names])
    after = {name: pb.cpu_seconds(p) for name, p in pids.items()}
    result = {}
    for name in proxies:
        served, errors = requests_served(outs[name])
        if not served or errors:
            pb.log(f"  {body} {name}: {served} requests, {errors} errors; see {outs[name]}")
            return None
        result[name] = ((after[name] - before[name]) * 1e6 / served, served)
    return result


def main():
    for tool, name in ((pb.NGINX, "nginx"), (pb.HAPROXY, "haproxy"), (pb.WRK, "wrk"),
                       (pb.TASKSET, "taskset")):
        if not tool:
            pb.log(f"{name} is missing (bench/side_by_side.sh installs it)")
            return 1
    if os.cpu_count() < 2:
        pb.log("this benchmark needs two CPUs")
        return 1
    if OTHER not in ("haproxy", "nginx", "before"):
        pb.log(f"OTHER is haproxy, nginx or before (with BEFORE=/path/to/rollcall-sidecar), not {OTHER}")
        return 1
    if OTHER == "before" and not pb.BEFORE:
        pb.log("OTHER=before needs BEFORE=/path/to/another/rollcall-sidecar")
        return 1
    shutil.rmtree(pb.OUT, ignore_errors=True)
    os.makedirs(pb.OUT)
    pb.write_configs()
    signal.signal(signal.SIGINT, pb.stop_all)
    signal.signal(signal.SIGTERM, pb.stop_all)
    failed = False
    ratios = {body: [] for body in BODIES}
    figures = {body: {"rollcall": [], OTHER: []} for body in BODIES}
    try:
        if pb.start_backends("pinned") is None:
            return 1
        for round_no in range(1, ROUNDS + 1):
            # Both proxies start afresh each round, in turns first: in an A/A run (one binary
            # in both places, started once) the proxy started first came out about 1% dearer
            # in every round, whichever wrk started first.
            order = ("rollcall", OTHER) if round_no % 2 else (OTHER, "rollcall")
            proxies = {}
            for name in order:
                proc = pb.start(pb.pinned("pinned", pb.PROXY_CPU, pb.proxy_command(name, "pinned")),
                                f"{name}.log")
                if not pb.wait_up(pb.PORTS[name], proc):
                    pb.log(f"{name} did not come up; see {pb.OUT}/{name}.log")
                    return 1
                proxies[name] = proc
            for body in BODIES:
                r = one_round(body, proxies, round_no)
                if r is None:
                    failed = True
                    break
                ours, theirs = r["rollcall"][0], r[OTHER][0]
                ratios[body].append(ours / theirs)
                figures[body]["rollcall"].append(ours)
                figures[body][OTHER].append(theirs)
                pb.log(f"round {round_no} {body}: rollcall {ours:.1f} us/req ({r['rollcall'][1]} requests), "
                       f"{OTHER} {theirs:.1f} us/req ({r[OTHER][1]} requests), ratio {ours / theirs:.2f}")
            for proc in proxies.values():
                pb.stop(proc)
            if failed:
                break
    finally:
        for proc in list(pb.running):
            pb.stop(proc)

    lines = [f"CPU per request side by side: rollcall ({' '.join(pb.SIDECAR_ARGS) or 'default flags'}) "
             f"and {OTHER} on CPU 0 at once, one thread each, wrk -c{CONNECTIONS} -d{DURATION} "
             f"on each, backends and wrk on CPU 1; {ROUNDS} rounds",
             f"machine: {os.cpu_count()} CPUs, {pb.cpu_model()}, load average {pb.loadavg()}"]
    if failed:
        lines.append("stopped early: a round failed (above); the rounds measured before it:")
    for body in BODIES:
        rs = ratios[body]
        if not rs:
            lines.append(f"{body}: no round measured")
            continue
        below = sum(r < 1 for r in rs)
        ours = statistics.median(figures[body]["rollcall"])
        theirs = statistics.median(figures[body][OTHER])
        lines.append(f"{body}: rollcall {ours:.1f} us/req, {OTHER} {theirs:.1f} us/req (medians); "
                     f"ratio {statistics.median(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f}), "
                     f"rollcall lower in {below} of {len(rs)} rounds")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(pb.OUT, "results.txt"), "w") as f:
        f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where ckcd-link's cycles go: `perf record` on the daemon (all its threads, user and
kernel, call graphs by frame pointer) while one CUBIC flow crosses it, shaped at 100 Mbit/s
and unshaped, in the namespace lab of bench_link_forwarding.py. Prints perf's flat profile
(self time) and the daemon's CPU per forwarded frame; writes the reports under
bench/results/profile_link/ (not committed; docs/ckcd-link.md quotes them).

    python3 bench/profile_link.py [--seconds 10] [--top 25] [--daemon-args "--single-thread"]

Needs root and perf (Debian's linux-perf). Holds the lab lock.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "link"))

from bench_link_forwarding import SHAPED_SPEC, UNLIMITED_SPEC, cpu_seconds, iperf  # noqa: E402
from linklab import NetLab  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.link_daemon import DEFAULT_BINARY, LinkDaemon  # noqa: E402

OUT = os.path.join(REPO, "bench", "results", "profile_link")
CASES = {"shaped_100mbit": (100_000_000, 10.0, SHAPED_SPEC),
         "unshaped": (100_000_000_000, 0.0, UNLIMITED_SPEC)}


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of the process, by thread id and name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def profile(lab: NetLab, name: str, seconds: int, top: int, daemon_args: list[str]) -> dict:
    rate, delay, spec = CASES[name]
    data = os.path.join(OUT, f"{name}.perf.data")
    d = LinkDaemon(lab.if_la, lab.if_lb, rate_bps=rate, delay_ms=delay, qdisc=spec, netns=lab.ns_m,
                   extra_args=daemon_args)
    d.start()
    pid = d.pid  # stop() forgets it
    try:
        perf = subprocess.Popen(["perf", "record", "-q", "-g", "-F", "2999", "-p", str(pid), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        c0, t0, th0 = cpu_seconds(d.pid), time.monotonic(), thread_cpu(d.pid)
        goodput = iperf(lab, seconds)
        c1, t1, th1 = cpu_seconds(d.pid), time.monotonic(), thread_cpu(d.pid)
        perf.send_signal(signal.SIGINT)
        _, perf_err = perf.communicate(timeout=60)
        st = d.stop()
    finally:
        d.kill()
    frames = sum(st["dirs"][x]["tx_frames"] for x in ("ab", "ba"))
    # The main thread's id is the process id; the others are the senders (ab first).
    threads = {("main" if tid == str(pid) else f"sender {tid}"):
               round(100 * (th1[tid] - th0.get(tid, 0)) / (t1 - t0), 1) for tid in sorted(th1, key=int)}
    cpu_s = c1 - c0
    flat = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol",
                           "--percent-limit", "0.5", "--stdio", "-g", "none"],
                          capture_output=True, text=True).stdout
    with open(os.path.join(OUT, f"{name}.txt"), "w") as f:
        f.write(flat)
    rows = [line for line in flat.splitlines() if line.strip() and not line.startswith("#")][:top]
    return {"case": name, "goodput_mbps": round(goodput / 1e6, 1), "cpu_pct": round(100 * cpu_s / (t1 - t0), 1),
            "frames": frames, "threads_cpu_pct": threads, "wakeups": st.get("wakeups"),
            "cpu_us_per_frame": round(1e6 * cpu_s / max(1, frames), 2),
            "perf_stderr": perf_err.decode(errors="replace").strip()[-300:], "top": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--daemon-args", default="", help="extra ckcd-link arguments, e.g. --single-thread")
    ap.add_argument("--only", choices=sorted(CASES), help="one case")
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("perf") is None:
        print("needs root and perf (apt-get install linux-perf)", file=sys.stderr)
        return 1
    if not DEFAULT_BINARY.exists():
        print(f"{DEFAULT_BINARY} missing: make -C datapath", file=sys.stderr)
        return 1
    os.makedirs(OUT, exist_ok=True)
    with lab_lock():
        lab = NetLab()
        try:
            lab.up()
            for name in [args.only] if args.only else CASES:
                r = profile(lab, name, args.seconds, args.top, shlex.split(args.daemon_args))
                print(f"\n== {name}: {r['goodput_mbps']} Mbit/s, ckcd-link {r['cpu_pct']} % of a core, "
                      f"{r['frames']} frames both ways, {r['cpu_us_per_frame']} us CPU per frame; "
                      f"threads (% of a core): {r['threads_cpu_pct']}; main-thread wake-ups {r['wakeups']}")
                if r["perf_stderr"]:
                    print("perf:", r["perf_stderr"])
                print("\n".join(r["top"]))
        finally:
            lab.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())

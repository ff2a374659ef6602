"""Real traffic between Mininet hosts: iperf3 with a chosen congestion control, and ping."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import threading
import time

# The kernel's own (built into the lab's kernel), then ours loaded as BPF for a run
# (experiments/lab/bpf_cc.py, docs/congestion-controls.md).
KERNEL_CONGESTION_CONTROLS = ("bbr", "cubic", "reno")
BPF_CONGESTION_CONTROLS = ("bpf_dctcp", "bpf_vegas")
CONGESTION_CONTROLS = KERNEL_CONGESTION_CONTROLS + BPF_CONGESTION_CONTROLS
# Those that negotiate ECN themselves (the SYN asks for it), and so must be their hosts'
# namespace default: iperf3 sets -C only after connect().
ECN_CONGESTION_CONTROLS = ("bpf_dctcp",)


class TrafficError(RuntimeError):
    pass


def iperf3(client, server, cc: str, duration_s: float = 3.0, port: int = 5201,
           extra: str = "") -> dict:
    """One TCP flow client -> server with congestion control `cc` (always passed with -C:
    the kernel's default here is bbr). Returns iperf3's JSON report.

    Both ends run through node.popen(), not node.cmd(): a Mininet node's shell serves
    one command at a time, and flows that share a host run from several threads.
    """
    if cc not in CONGESTION_CONTROLS:
        raise ValueError(f"congestion control {cc!r}: expected one of {', '.join(CONGESTION_CONTROLS)}")
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        cli = client.popen(["iperf3", "-c", server.IP(), "-p", str(port), "-t", f"{duration_s:g}",
                            "-C", cc, "-J", *shlex.split(extra)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = cli.communicate(timeout=duration_s + 30)
        except subprocess.TimeoutExpired:
            cli.kill()
            out, _ = cli.communicate()
    finally:
        if srv.poll() is None:  # -1 ends the server after one client, but not if none came
            srv.kill()
        srv.wait()
    text = out.decode(errors="replace")
    try:
        report = json.loads(text[text.index("{"):])
    except ValueError:
        raise TrafficError(f"iperf3 {client.name}->{server.name} gave no JSON: {text[-300:]!r}") from None
    if "error" in report:
        raise TrafficError(f"iperf3 {client.name}->{server.name}: {report['error']}")
    return report


def together(*flows) -> list[dict]:
    """Run iperf3 flows (client, server, cc, seconds, port) at the same time; reports in order."""
    reports: list = [None] * len(flows)
    errors: list = []

    def run(i, flow):
        client, server, cc, seconds, port = flow
        try:
            reports[i] = iperf3(client, server, cc, duration_s=seconds, port=port)
        except Exception as err:  # surfaced below, in the caller's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(flows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return reports


def goodput_bps(report: dict) -> float:
    return float(report["end"]["sum_received"]["bits_per_second"])


def sender_cc(report: dict) -> str | None:
    return report["end"].get("sender_tcp_congestion")


def ping_rtts_ms(client, server, count: int = 10, interval_s: float = 0.2) -> list[float]:
    out = client.cmd(f"ping -n -c {count} -i {interval_s} -W 2 {server.IP()}")
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", out)]

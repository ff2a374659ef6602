"""Controller load, on the real lab, against Ryu's own `ryu.app.simple_switch_13` as the yardstick:
what our controller costs the switches, how many packet-ins it handles, whether a packet-in storm
hurts traffic that already flows, and how fast its REST API answers while it is busy.

1. flows: Mininet's TreeTopo(depth=2, fanout=8) (mininet.topolib; 9 switches, 64 hosts) under
   ours, then under simple_switch_13, on the same private OVS. After `net.pingAll(timeout=1)`: loss %, pingall
   seconds, flows on the root switch and the most on an edge switch (every table), and the ratio
   ours/simple_switch_13. Ours keys forwarding on the destination (one flow per host per switch);
   simple_switch_13 on (in_port, eth_src, eth_dst), a flow per host pair on every switch of its path.
   `--large` adds TreeTopo(depth=2, fanout=16) (17 switches, 256 hosts). Its full pingall would be
   65,280 sequential pings (4,032 took 24 s under ours and 56 s under simple_switch_13 here: 6-15
   min per controller at 256 hosts), so it runs a documented subset instead: every host h_i pings
   h_((i+16) mod 256), the host at the same place under the next edge switch, and back
   (`net.ping([a, b])`, 512 pings, every host once a destination, every pair across the root).
2. packet-in throughput: one switch, h1 h2 h3. The storm generator (experiments/lab/storm.py) in h1 sends N (20,000)
   distinct Ethernet/IPv4/UDP frames at --pktin-rate (30,000/s; 0: as fast as it can) whose
   destination neither controller knows (dst 10.9.x.y, a random locally administered unicast MAC,
   a sequence number in the payload), so each is a packet-in that the controller floods (ours to
   the other edge ports by packet-out, simple_switch_13 with OFPP_FLOOD). A sink in h2 counts the
   marked frames it receives: packet-ins/s = frames at h2 / (last - first arrival); delivered =
   frames at h2 / frames sent. Frames beyond a controller's rate wait in the OpenFlow connection's
   socket buffers (ours delivers all 20,000), so the rate is its drain rate. Goal (issue): ours >=
   0.8x simple_switch_13. The table-miss flow's packet-in limit (PUT /packet-in {"limit_pps": null})
   is turned off for this; the default limit is measured too, for 5 s of
   frames (its burst would dominate a short run).
3. a storm beside traffic: same switch; iperf3 CUBIC h2 -> h3 for 10 s alone, then again while h1's
   generator sends for the whole flow, at SCAN_PPS (20,000 frames/s, a fast scan) and as fast as it
   can (~300,000/s). Goodput with/without; goal (issue): >= 0.9. Ours with its default packet-in limit and with none, and
   simple_switch_13 as the yardstick; the host's CPU and ovs-vswitchd's, ryu-manager's and the
   generator's share of a core during each run. The generator is a Python loop that itself takes most
   of a core of the two: part of what the flow loses is the CPU the storm's source takes, not the
   controller (compare with simple_switch_13's ratio).
4. REST under load: ours, the one-switch net connected; 50 client threads, each with its own HTTP/1.1
   connection, loop GET /state and GET /policy for 10 s while the main thread changes policy once a
   second (PUT /approaches, separate_queues on/off). p50/p95/p99/max of GETs and PUTs, request counts,
   errors. Goal (issue): p99 <= 200 ms. The clients share the 2 cores with the controller (and
   Python's GIL among themselves): latencies are what a client on this host sees.

    .venv/bin/python bench/bench_controller_load.py [--large] [--update-baseline]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchlib import machine, save, side_by_side  # noqa: E402
from experiments.lab import storm  # noqa: E402
from experiments.lab.net import Controller, controlled_net, mininet_net, teardown_on_sigterm  # noqa: E402
from experiments.lab.traffic import goodput_bps, iperf3  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.private_ovs import PrivateOVS, ofctl  # noqa: E402
from tests.hostload import HostLoad, ProcCpu, vswitchd_pid  # noqa: E402
from tests.waiting import eventually  # noqa: E402

OF_PORT, REST_PORT = 16791, 18191
SIMPLE = "ryu.app.simple_switch_13"
MARKER = storm.MARKER
STORM_S = 10
# A fast port scan (masscan's default is 100 packets/s, nmap -T5 a few thousand): the storm a
# network meets. The full-speed storm (~300k frames/s) is the worst case this 2-core machine
# can make, where the generator itself takes most of a core from vswitchd and iperf3.
SCAN_PPS = 20_000
LIMIT_RUN_S = 5  # seconds of frames for the packet-in run under the default limit
REST_CLIENTS, REST_S = 50, 10

# The generator is experiments/lab/storm.py; the sink runs in a host's namespace (node.popen) as a
# small Python program counting the generator's marked frames.
SINK = r"""
import json, socket, sys, time
iface, marker, idle_s, max_s = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((iface, 0))
try:
    s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
except OSError:
    pass
s.settimeout(0.1)
off = 14 + 20 + 8
seqs, first, last = set(), None, None
frames = 0
start = time.time()
print("listening", flush=True)
while True:
    now = time.time()
    if now - start > max_s or (last is not None and now - last > idle_s):
        break
    try:
        data = s.recv(2048)
    except socket.timeout:
        continue
    if data[off:off + len(marker)] == marker:
        t = time.time()
        frames += 1
        seqs.add(int.from_bytes(data[off + len(marker):off + len(marker) + 8], "big"))
        first = first if first is not None else t
        last = t
print(json.dumps({"frames": frames, "distinct": len(seqs), "t_first": first, "t_last": last}), flush=True)
"""


# -- helpers --------------------------------------------------------------------------------

def pct(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def flow_count(bridge: str) -> int:
    """Flows in every table of the bridge (the lines of dump-flows that carry actions)."""
    return sum(1 for line in ofctl("dump-flows", bridge).splitlines() if "actions=" in line)


def links_known(api) -> int:
    return len(api.ok("GET", "/state")["links"])


def host_cpu(load: HostLoad) -> dict:
    samples = load.samples
    if not samples:
        return {"host_busy_pct": None, "steal_pct": None}
    return {"host_busy_pct": round(statistics.mean(s.busy_pct for s in samples), 1),
            "steal_pct": round(statistics.mean(s.steal_pct for s in samples), 1)}


class OneSwitch:
    """s1 with h1, h2, h3 on ports 1, 2, 3 (a Topo built on demand: mininet imports late)."""

    def __new__(cls):
        from mininet.topo import Topo

        topo = Topo()
        s1 = topo.addSwitch("s1")
        for i in (1, 2, 3):
            topo.addLink(topo.addHost(f"h{i}"), s1, port2=i)
        return topo


def tree(fanout: int):
    from mininet.topolib import TreeTopo
    return TreeTopo(depth=2, fanout=fanout)


def packet_in_limit(api) -> dict:
    """The packet-in limit as GET /packet-in shows it."""
    return api.ok("GET", "/packet-in")


def set_packet_in_limit(api, limit_pps) -> None:
    api.ok("PUT", "/packet-in", {"limit_pps": limit_pps})


def pktin_runs(net, count: int, rate: float, runs: int, ctl_pid: int, label: str) -> list[dict]:
    out = []
    for i in range(runs):
        r = pktin_run(net, count, rate, ctl_pid)
        print(f"[pktin] {label}, run {i + 1}/{runs}: {r}", flush=True)
        out.append(r)
    return out


def simple_switch(work: str, name: str) -> Controller:
    return Controller(of_port=OF_PORT, app=SIMPLE, log_path=os.path.join(work, f"{name}.log"))


# -- 1: flows and pingall on a tree -----------------------------------------------------------

def ring_pairs(hosts, fanout: int):
    n = len(hosts)
    return [(hosts[i], hosts[(i + fanout) % n]) for i in range(n)]


def ping_run(net, fanout: int, subset: bool) -> dict:
    t0 = time.monotonic()
    if subset:
        hosts = sorted(net.hosts, key=lambda h: int(h.name[1:]))
        losses = [net.ping([a, b], timeout=1) for a, b in ring_pairs(hosts, fanout)]
        loss, pings = statistics.mean(losses), 2 * len(hosts)
    else:
        loss, pings = net.pingAll(timeout=1), len(net.hosts) * (len(net.hosts) - 1)
    seconds = time.monotonic() - t0
    root = "s1"  # TreeTopo names the root s1, the edge switches s2...
    edges = [s.name for s in net.switches if s.name != root]
    edge_flows = {name: flow_count(name) for name in edges}
    return {"loss_pct": round(float(loss), 2), "pings": pings, "ping_s": round(seconds, 1),
            "root_flows": flow_count(root), "edge_flows_max": max(edge_flows.values())}


def flows_case(fanout: int, subset: bool) -> dict:
    topo_name = f"tree2x{fanout}"
    out = {}
    n_links = fanout
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work:
        print(f"[flows {topo_name}] ours: starting {fanout + 1} switches, {fanout * fanout} hosts", flush=True)
        with controlled_net(tree(fanout), work, of_port=OF_PORT, rest_port=REST_PORT,
                            discovery_wait_s=0) as (net, ctl, api):
            eventually(lambda: links_known(api) >= n_links, timeout_s=30,
                       what=f"LLDP finds the {n_links} tree links")
            print(f"[flows {topo_name}] ours: {'ring subset' if subset else 'pingall'} ...", flush=True)
            out["ours"] = ping_run(net, fanout, subset)
            print(f"[flows {topo_name}] ours: {out['ours']}", flush=True)
        print(f"[flows {topo_name}] simple_switch_13: starting", flush=True)
        with simple_switch(work, "simple") as ctl, mininet_net(tree(fanout), ctl, discovery_wait_s=0) as net:
            print(f"[flows {topo_name}] simple_switch_13: {'ring subset' if subset else 'pingall'} ...",
                  flush=True)
            out["simple_switch_13"] = ping_run(net, fanout, subset)
            print(f"[flows {topo_name}] simple_switch_13: {out['simple_switch_13']}", flush=True)
    ours, ss = out["ours"], out["simple_switch_13"]
    out["ratio_root_flows"] = ratio(ours["root_flows"], ss["root_flows"])
    out["ratio_edge_flows_max"] = ratio(ours["edge_flows_max"], ss["edge_flows_max"])
    out["ratio_ping_s"] = ratio(ours["ping_s"], ss["ping_s"])
    out["pings"] = ("all pairs (net.pingAll)" if not subset else
                    f"subset: h_i <-> h_((i+{fanout}) mod {fanout * fanout}), net.ping per pair; "
                    "simple_switch_13's flows grow with the host pairs that talked, ours with the hosts: "
                    "the flow ratios of a subset are not those of a full pingall")
    return out


# -- 2 and 3: the packet-in generator ----------------------------------------------------------

def start_generator(h1, count: int, rate: float, duration_s: float = 0.0):
    how_long = ["--seconds", str(duration_s)] if duration_s > 0 else ["--count", str(count)]
    return h1.popen([sys.executable, "-m", "experiments.lab.storm", h1.defaultIntf().name, *how_long,
                     *(["--rate", str(rate)] if rate > 0 else []), "--marker", MARKER.decode()],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def finish(proc, timeout_s: float, what: str) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"{what} did not finish in {timeout_s:.0f} s: {err[-300:]}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {err[-500:]}")
    return json.loads(out.strip().splitlines()[-1])


def pktin_run(net, count: int, rate: float, ctl_pid: int) -> dict:
    h1, h2 = net.get("h1", "h2")
    sink = h2.popen([sys.executable, "-c", SINK, h2.defaultIntf().name, MARKER.decode(), "2.0", "120"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sink.stdout.readline().strip() != "listening":  # blocks until its socket is bound
        raise RuntimeError(f"sink did not start: {sink.stderr.read()[-300:]}")
    cpu = ProcCpu({"ryu_manager": ctl_pid, "vswitchd": vswitchd_pid()})
    with cpu:
        gen = start_generator(h1, count, rate)
        g = finish(gen, 120, "generator")
        s = finish(sink, 130, "sink")
    span = (s["t_last"] - s["t_first"]) if s["frames"] > 1 else None
    sent_s = max(g["t_last"] - g["t_first"], 1e-6)
    return {"sent": g["sent"], "sent_s": round(sent_s, 2), "offered_pps": round(g["sent"] / sent_s),
            "delivered": s["distinct"], "delivered_fraction": round(s["distinct"] / g["sent"], 3),
            "duplicates": s["frames"] - s["distinct"],
            "packet_ins_per_s": round(s["distinct"] / span) if span else None,
            "ryu_core_pct": cpu.core_pct["ryu_manager"], "vswitchd_core_pct": cpu.core_pct["vswitchd"]}


def warm(net) -> None:
    """Every controller knows every host (and h1's MAC) before the generator starts."""
    loss = net.pingAll(timeout=1)
    if loss:
        raise RuntimeError(f"pingall lost {loss} % on the one-switch net")


@contextlib.contextmanager
def ours_on_one_switch(work: str):
    """Our controller and the one-switch net, every host known to it."""
    with controlled_net(OneSwitch(), work, of_port=OF_PORT, rest_port=REST_PORT,
                        discovery_wait_s=0) as (net, ctl, api):
        warm(net)
        yield net, ctl, api


def pktin_case(count: int, rate: float, runs: int) -> dict:
    out: dict = {"frames": count, "rate_pps": rate or "max", "runs": runs}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work:
        with ours_on_one_switch(work) as (net, ctl, api):
            default_limit = packet_in_limit(api)
            out["default_limit"] = default_limit
            set_packet_in_limit(api, None)
            print(f"[pktin] ours: packet-in limit off (default was {default_limit})", flush=True)
            out["ours"] = pktin_runs(net, count, rate, runs, ctl.proc.pid, "ours, no limit")
            set_packet_in_limit(api, default_limit["limit_pps"])
            # Longer (LIMIT_RUN_S of frames): under the limit there is no backlog to drain, and
            # the meter's burst would dominate a short run.
            n = int(rate * LIMIT_RUN_S) if rate else count
            r = pktin_run(net, n, rate, ctl.proc.pid)
            r["beyond_burst_per_s"] = round((r["delivered"] - default_limit["burst"]) / r["sent_s"])
            print(f"[pktin] ours, default limit {default_limit}: {r}", flush=True)
            out["ours_default_limit"] = r
        with simple_switch(work, "simple") as ctl, mininet_net(OneSwitch(), ctl, discovery_wait_s=0) as net:
            warm(net)
            out["simple_switch_13"] = pktin_runs(net, count, rate, runs, ctl.proc.pid, "simple_switch_13")

    def best(rs):  # the median run by rate
        vals = [r["packet_ins_per_s"] for r in rs if r["packet_ins_per_s"]]
        return statistics.median(vals) if vals else None
    out["ours_pps"] = best(out["ours"])
    out["simple_switch_13_pps"] = best(out["simple_switch_13"])
    out["ratio"] = ratio(out["ours_pps"], out["simple_switch_13_pps"])
    return out


def storm_pair(net, ctl_pid: int, label: str, rate: float = 0) -> dict:
    """iperf3 alone, then beside a storm at `rate` frames/s (0: as fast as the generator can)."""
    h1, h2, h3 = net.get("h1", "h2", "h3")
    label = f"{label}, storm {rate:.0f}/s" if rate else f"{label}, storm at full speed"
    with HostLoad() as load:
        alone = goodput_bps(iperf3(h2, h3, "cubic", duration_s=STORM_S, port=5501))
    print(f"[storm] {label}: alone {alone / 1e6:.1f} Mbit/s; {load}", flush=True)
    gen = start_generator(h1, 0, rate, duration_s=STORM_S + 1.5)  # covers iperf3's start-up too
    with HostLoad() as sload, ProcCpu({"ryu_manager": ctl_pid, "vswitchd": vswitchd_pid(),
                                      "generator": gen.pid}) as cpu:
        storm = goodput_bps(iperf3(h2, h3, "cubic", duration_s=STORM_S, port=5502))
    g = finish(gen, 30, "storm generator")
    r = {"alone_mbps": round(alone / 1e6, 1), "storm_mbps": round(storm / 1e6, 1),
         "ratio": ratio(storm, alone), "storm_frames_sent": g["sent"],
         "storm_offered_pps": round(g["sent"] / max(g["t_last"] - g["t_first"], 1e-6)),
         **{f"{k}_core_pct": v for k, v in cpu.core_pct.items()}, **host_cpu(sload)}
    print(f"[storm] {label}: with storm {storm / 1e6:.1f} Mbit/s (x{r['ratio']}); {sload}; "
          f"core %: {cpu.core_pct}", flush=True)
    return r


def storm_case() -> dict:
    out: dict = {}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work:
        with ours_on_one_switch(work) as (net, ctl, api):
            limit = packet_in_limit(api)
            out["ours_default_limit_scan"] = storm_pair(net, ctl.proc.pid, f"ours, default limit {limit}", SCAN_PPS)
            out["ours_default_limit"] = storm_pair(net, ctl.proc.pid, f"ours, default limit {limit}")
            set_packet_in_limit(api, None)
            out["ours_no_limit_scan"] = storm_pair(net, ctl.proc.pid, "ours, no limit", SCAN_PPS)
            out["ours_no_limit"] = storm_pair(net, ctl.proc.pid, "ours, no limit")
        # The yardstick: the same storm where each packet-in is one OFPP_FLOOD packet-out.
        with simple_switch(work, "simple") as ctl, mininet_net(OneSwitch(), ctl, discovery_wait_s=0) as net:
            warm(net)
            out["simple_switch_13_scan"] = storm_pair(net, ctl.proc.pid, "simple_switch_13", SCAN_PPS)
            out["simple_switch_13"] = storm_pair(net, ctl.proc.pid, "simple_switch_13")
    return out


# -- 4: REST under concurrent clients ------------------------------------------------------------

def rest_case() -> dict:
    gets: list[float] = []
    puts: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    paths = ("/coex/v1/state", "/coex/v1/policy")

    def client(i: int):
        conn = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=10)
        n = i
        mine = []
        while not stop.is_set():
            path = paths[n % 2]
            n += 1
            t0 = time.perf_counter()
            try:
                conn.request("GET", path)
                res = conn.getresponse()
                res.read()
                ok = res.status == 200
            except (OSError, http.client.HTTPException) as err:
                ok = False
                with lock:
                    errors.append(f"GET {path}: {err!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=10)
                continue
            if ok:
                mine.append(time.perf_counter() - t0)
            else:
                with lock:
                    errors.append(f"GET {path}: {res.status}")
        conn.close()
        with lock:
            gets.extend(mine)

    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work:
        with ours_on_one_switch(work) as (net, ctl, api):
            print(f"[rest] {REST_CLIENTS} clients for {REST_S} s, a PUT /approaches a second", flush=True)
            threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(REST_CLIENTS)]
            for t in threads:
                t.start()
            writer = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=10)
            t_end = time.monotonic() + REST_S
            k = 0
            while time.monotonic() < t_end:
                tick = time.monotonic()
                body = json.dumps({"separate_queues": k % 2 == 0})
                k += 1
                t0 = time.perf_counter()
                try:
                    writer.request("PUT", "/coex/v1/approaches", body, {"Content-Type": "application/json"})
                    res = writer.getresponse()
                    res.read()
                    if res.status == 200:
                        puts.append(time.perf_counter() - t0)
                    else:
                        errors.append(f"PUT /approaches: {res.status}")
                except (OSError, http.client.HTTPException) as err:
                    errors.append(f"PUT /approaches: {err!r}")
                    writer.close()
                    writer = http.client.HTTPConnection("127.0.0.1", REST_PORT, timeout=10)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            stop.set()
            for t in threads:
                t.join(15)
            writer.close()

    def ms(v):
        return None if v is None else round(1000 * v, 1)
    out = {"clients": REST_CLIENTS, "seconds": REST_S,
           "gets": len(gets), "gets_per_s": round(len(gets) / REST_S),
           "get_p50_ms": ms(pct(gets, 0.5)), "get_p95_ms": ms(pct(gets, 0.95)),
           "get_p99_ms": ms(pct(gets, 0.99)), "get_max_ms": ms(max(gets) if gets else None),
           "puts": len(puts), "put_p50_ms": ms(pct(puts, 0.5)), "put_p95_ms": ms(pct(puts, 0.95)),
           "put_p99_ms": ms(pct(puts, 0.99)), "put_max_ms": ms(max(puts) if puts else None),
           "errors": len(errors), "first_errors": errors[:5],
           "goal_p99_ms": 200}
    out["meets_goal"] = bool(gets) and out["get_p99_ms"] <= 200 and (not puts or out["put_p99_ms"] <= 200)
    print(f"[rest] {out}", flush=True)
    return out


# -- main ---------------------------------------------------------------------------------------

def flat(doc: dict) -> dict:
    rows = {}
    for topo, r in doc.get("flows", {}).items():
        for who in ("ours", "simple_switch_13"):
            for k in ("loss_pct", "ping_s", "root_flows", "edge_flows_max"):
                rows[f"flows {topo} {who} {k}"] = r.get(who, {}).get(k)
        for k in ("ratio_root_flows", "ratio_edge_flows_max", "ratio_ping_s"):
            rows[f"flows {topo} {k}"] = r.get(k)
    p = doc.get("pktin", {})
    if p:
        rows["pktin ours pps"] = p.get("ours_pps")
        rows["pktin simple_switch_13 pps"] = p.get("simple_switch_13_pps")
        rows["pktin ratio ours/simple"] = p.get("ratio")
        rows["pktin ours delivered"] = statistics.median(r["delivered_fraction"] for r in p["ours"])
        rows["pktin simple delivered"] = statistics.median(r["delivered_fraction"]
                                                           for r in p["simple_switch_13"])
        if "ours_default_limit" in p:
            rows["pktin ours default-limit pps"] = p["ours_default_limit"]["packet_ins_per_s"]
            rows["pktin ours default-limit beyond burst/s"] = p["ours_default_limit"].get("beyond_burst_per_s")
    for case, r in doc.get("storm", {}).items():
        if isinstance(r, dict):
            for k in ("alone_mbps", "storm_mbps", "ratio", "vswitchd_core_pct", "ryu_manager_core_pct"):
                rows[f"storm {case} {k}"] = r.get(k)
    rest = doc.get("rest", {})
    for k in ("gets_per_s", "get_p50_ms", "get_p99_ms", "get_max_ms", "put_p50_ms", "put_p99_ms", "errors"):
        if k in rest:
            rows[f"rest {k}"] = rest[k]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--large", action="store_true",
                    help="also TreeTopo(depth=2, fanout=16), 256 hosts, with the ring ping subset")
    ap.add_argument("--pktin-frames", type=int, default=20000, help="frames per packet-in run (default 20000)")
    ap.add_argument("--pktin-rate", type=float, default=30000,
                    help="generator rate in frames/s for the packet-in runs (default 30000, above what "
                         "either controller handles here; 0: as fast as it can)")
    ap.add_argument("--pktin-runs", type=int, default=2, help="packet-in runs per controller (default 2)")
    ap.add_argument("--only", choices=("flows", "pktin", "storm", "rest"), action="append",
                    help="run only these parts (repeatable; default all)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if not 100 <= args.pktin_frames <= 1_000_000:
        ap.error("--pktin-frames must be between 100 and 1000000")
    if not 1 <= args.pktin_runs <= 10:
        ap.error("--pktin-runs must be between 1 and 10")
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    teardown_on_sigterm()
    parts = args.only or ["flows", "pktin", "storm", "rest"]
    doc: dict = {"benchmark": "controller_load", "machine": machine(), "large": args.large}
    t0 = time.monotonic()
    if "flows" in parts:
        doc["flows"] = {"tree2x8": flows_case(8, subset=False)}
        if args.large:
            doc["flows"]["tree2x16"] = flows_case(16, subset=True)
    if "pktin" in parts:
        doc["pktin"] = pktin_case(args.pktin_frames, args.pktin_rate, args.pktin_runs)
    if "storm" in parts:
        doc["storm"] = storm_case()
    if "rest" in parts:
        doc["rest"] = rest_case()
    doc["wall_s"] = round(time.monotonic() - t0)
    base = save("controller_load", doc, args.update_baseline)
    side_by_side(flat(doc), flat(base), base.get("machine"), width=44)
    return 0


if __name__ == "__main__":
    sys.exit(main())

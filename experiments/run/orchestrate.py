"""The experiment runner: scenarios -> lab runs -> raw records on disk.

For each case (discipline x approach) and repeat, a fresh lab on the shared private OVS:

  ryu-manager ckcd_coex  +  Mininet topology  +  ckcd-link on every emulated link
  -> pingall (ARP, host learning, paths) -> CoEx policy through REST (scenarios with
  aggregates) -> tcp_metrics flushed on every host -> iperf3 servers, ping, samplers
  -> clients started at their start times -> wait -> collect -> tear down.

Every piece is a context manager or is killed in a `finally`, so Ctrl-C, SIGTERM (mapped to
KeyboardInterrupt by the CLI) and failures leave nothing behind. The whole batch holds the
lab lock: one lab per machine.

What a run collects (all times in seconds since the run's t0, when the first client may start):
- per flow: iperf3 JSON (client with --get-server-output): receiver goodput per second, the
  sender's smoothed RTT (tcp_info) per second, retransmits; per-flow drops from ckcd-link;
- per link: ckcd-link's 100 ms log (queue length, sojourn, delivered bytes, drops by reason),
  its dequeue samples (sojourn percentiles), final stats (schedule keeping);
- ping RTT from the scenario's ping source to its destination every 0.2 s;
- the machine's CPU from /proc/stat every second (and vswitchd's and ckcd-link's share).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import zlib

from experiments.analysis import metrics as analysis

from experiments.batch import provenance
from experiments.batch.plan import (Batch, BatchError, PlanItem, Shard, check_resume, complete, declared_order,
                               plan_batch, read_batch_file, write_batch_file)
from experiments.run.probes.ckcd_state import CkcdStateReader
from experiments.run.probes.cpu import CpuSampler
from experiments.lab.net import Controller, mininet_net
from experiments.run.progress import Progress
from experiments.batch.records import (finished, finished_runs, read_record, run_dir_of, run_key, trusted, walk_records,
                                 write_json)
from experiments.lab.rest_client import CoexClient
from experiments.scenario.model import Case, Flow, Scenario, spec_with_addresses
from experiments.run.probes.ss import TcpInfoSampler
from experiments.lab.topos import topology
from ovs_config.bottleneck import SwitchLink
from ovs_config.lablock import lab_lock
from ovs_config.link_daemon import LinkControl
from ovs_config.private_ovs import PrivateOVS

OF_PORT, REST_PORT = 16700, 18200  # not the defaults: a user's own controller may use 6653/8080
LOG_INTERVAL_MS = 100
SAMPLE_PERIOD_S = 0.5  # samples(n=1024) every 0.5 s: all dequeues up to 2048/s, a fair sample above
RUN_OVERHEAD_S = 15.0  # bring-up and tear-down per run, for the first time estimate
FLOW_GRACE_S = 20.0
MAX_STORED_SAMPLES = 30000


class RunError(RuntimeError):
    pass


def _log(msg: str) -> None:
    print(msg, flush=True)  # a batch's log is often a file: lines must not wait in a buffer


def run_batch(scenarios: list[Scenario], out_dir: str, log=_log, *, batch: Batch | None = None,
              resume: bool = False, command: str | None = None, until_trusted: int | None = None,
              extra_max: int | None = None) -> list[dict]:
    """Run this machine's part of a batch (all of it by default: every case of every scenario
    `repeat` times, in an order shuffled by a seed drawn from the grid) and return the run
    records of that part, in the scenarios' declared order (also on disk).

    A results directory holds one batch: one that holds finished runs is refused unless
    `resume`, which keeps the runs it holds complete for this batch and runs the rest. With
    `until_trusted` N, a case of this shard with fewer than N trusted runs gets extra runs
    (numbered after the plan's, see extra_rep) until it has N, at most `extra_max` per case."""
    if batch is None:
        batch = plan_batch(scenarios, provenance.project_version())
    if resume:
        check_resume(out_dir, batch)
    else:
        _refuse_finished_runs(out_dir)
    write_batch_file(out_dir, batch, command)
    held = _held_runs(out_dir, batch) if resume else {}
    todo = [item for item in batch.mine() if item.key not in held]
    lab = _BatchLab(out_dir, {"batch_id": batch.batch_id, "provenance": provenance.collect()}, log,
                    Progress([item.scenario.duration_s for item in todo], RUN_OVERHEAD_S))
    records = dict(held)
    _log_plan(log, batch, out_dir, resume, len(held), lab.progress)
    with lab_lock(timeout_s=4 * 3600), PrivateOVS():
        for item in todo:
            records[item.key] = lab.run(item)
        if until_trusted:
            _top_up(lab, batch, records, until_trusted, until_trusted if extra_max is None else extra_max)
        lab.progress.close()
    return _declared(batch, records)


def _refuse_finished_runs(out_dir: str) -> None:
    done = finished_runs(out_dir)
    if done:
        held = read_batch_file(out_dir)
        of = f" of batch {held['batch_id']}" if held else ""
        raise BatchError(f"--out {out_dir} already holds {len(done)} finished runs{of} (e.g. {done[0]}), which a "
                         f"new batch would write over: run into a new directory and pool both with `ckcd-coex "
                         f"report {out_dir} NEWDIR --out POOLED`, or add --resume to continue that batch")


def _held_runs(out_dir: str, batch: Batch) -> dict[str, dict]:
    """This batch's runs out_dir holds: the complete ones of the plan, and every extra run
    (--until-trusted's, failed ones too: their repetition numbers are spent)."""
    plan = {item.key for item in batch.plan}
    held = {}
    for record in walk_records(out_dir):
        if record.get("batch_id") != batch.batch_id:
            continue
        key = run_key(record)
        if complete(record, batch.batch_id) or key not in plan:
            held[key] = record
    return held


def _log_plan(log, batch: Batch, out_dir: str, resume: bool, kept: int, progress: Progress) -> None:
    mine = batch.mine()
    part = f"shard {batch.shard} of batch {batch.batch_id}: {len(mine)} of {len(batch.plan)} runs" \
        if batch.shard.count > 1 else f"batch {batch.batch_id}: {len(mine)} runs"
    order = f"order shuffled by seed {batch.seed}" if batch.shuffled else "in the order written"
    log(f"[runner] {part}, {order}")
    if resume:
        log(f"[runner] --resume: {kept} runs of this batch in {out_dir} kept, {len(progress.durations)} to run")
    log(f"[runner] {len(progress.durations)} runs, about {progress.fmt(progress.remaining_s())} "
        f"(waiting for the lab lock: one lab per machine)")


class _BatchLab:
    """Runs one item after another into out_dir, keeping the progress line and the log."""

    def __init__(self, out_dir: str, made_by: dict, log, progress: Progress):
        self.out_dir, self.made_by, self.log, self.progress = out_dir, made_by, log, progress
        self.index = 0

    def run(self, item: PlanItem, note: str = "") -> dict:
        scenario, case, rep = item.scenario, item.case, item.rep
        run_dir = run_dir_of(self.out_dir, scenario.name, case.name, rep)
        label = f"{scenario.name}/{case.name} rep {rep}/{scenario.repeat}{note}"
        self.progress.begin_run(self.index, label)
        started = time.monotonic()
        try:
            record = run_case(scenario, case, rep, run_dir, self.progress, made_by=self.made_by)
        except KeyboardInterrupt:
            self.progress.close()
            raise
        except Exception as err:  # one failed run must not lose the batch
            record = {**failed_record(scenario, case, rep, f"{type(err).__name__}: {err}"), **self.made_by}
            if not finished(read_record(run_dir)):  # the refusal to write over a finished run
                write_json(os.path.join(run_dir, "run.json"), record)
        self.progress.end_run(time.monotonic() - started)
        self.index += 1
        self.log(f"[runner] {label}: {_outcome(record)}")
        return record


def _outcome(record: dict) -> str:
    m = record.get("metrics") or {}
    if record.get("error"):
        return f"FAILED: {record['error']}"
    trust = "trusted" if m["fidelity"]["trusted"] else "UNTRUSTED: " + "; ".join(m["fidelity"]["reasons"])
    return (f"Jain {m['jain']:.3f}, total {m['total_mbps']:.1f} Mbit/s, "
            f"queue delay {analysis.fmt(m['queue_delay_ms']['mean'])} ms, RTT {analysis.fmt(m['rtt_ms']['mean'])} ms "
            f"({trust})")


def extra_rep(repeat: int, shard: Shard, k: int) -> int:
    """The repetition number of a case's k-th extra run (from 0) in a shard: after the plan's
    1..repeat, interleaved by shard as the plan is, so two shards never pick the same number."""
    return repeat + 1 + shard.index + k * shard.count


def _top_up(lab: _BatchLab, batch: Batch, records: dict[str, dict], until: int, extra_max: int) -> None:
    """Extra runs, one per short case a round (so a drift of the machine spreads over all of
    them), until each case of this shard has `until` trusted runs or has had extra_max extras."""
    cases = list(dict.fromkeys((item.scenario.name, item.case.name) for item in batch.mine()))
    by_name = {(item.scenario.name, item.case.name): item for item in batch.mine()}

    def runs_of(case):
        return [r for r in records.values() if (r["scenario"]["name"], r["case"]["name"]) == case]

    def extras_of(case):
        return sum(1 for r in runs_of(case) if r["rep"] > by_name[case].scenario.repeat)

    def short(case):
        return sum(1 for r in runs_of(case) if trusted(r)) < until and extras_of(case) < extra_max
    while any(short(c) for c in cases):
        for case in [c for c in cases if short(c)]:
            item = by_name[case]
            rep = extra_rep(item.scenario.repeat, batch.shard, extras_of(case))
            lab.progress.durations.append(item.scenario.duration_s)
            have = sum(1 for r in runs_of(case) if trusted(r))
            record = lab.run(PlanItem(item.scenario, item.case, rep), f" (extra: {have}/{until} trusted)")
            records[f"{case[0]}/{case[1]}/rep{rep}"] = record
    for case in cases:
        have, extras = sum(1 for r in runs_of(case) if trusted(r)), extras_of(case)
        if extras or have < until:
            lab.log(f"[runner] --until-trusted {until}: {case[0]}/{case[1]} has {have} trusted of "
                    f"{len(runs_of(case))} runs after {extras} extra" + (f" (the bound of {extra_max} is spent)"
                                                                        if have < until else ""))


def _declared(batch: Batch, records: dict[str, dict]) -> list[dict]:
    """The records in the scenarios' declared order (cases as written, repetitions in order)."""
    place = {(item.scenario.name, item.case.name): n for n, item in enumerate(declared_order(batch.scenarios))}
    return sorted(records.values(), key=lambda r: (place.get((r["scenario"]["name"], r["case"]["name"]), 0), r["rep"]))


def failed_record(scenario: Scenario, case: Case, rep: int, error: str) -> dict:
    return {"scenario": scenario.to_dict(), "case": {"name": case.name, "discipline": case.discipline,
                                                    "approach": case.approach},
            "rep": rep, "error": error, "metrics": None}


def run_case(scenario: Scenario, case: Case, rep: int, run_dir: str, progress: Progress | None = None,
             made_by: dict | None = None) -> dict:
    """One lab run of one case; returns the run record (written to run_dir/run.json), with
    `made_by` (its batch and provenance) in it."""
    # A failed run's files go; a finished run's never do. A symlink planted among them (or as
    # the directory) must not send a root run's deletes and writes elsewhere.
    if os.path.islink(run_dir):
        raise RunError(f"{run_dir} is a symlink: a run writes only into a directory of its own")
    if finished(read_record(run_dir)):
        raise RunError(f"{run_dir} holds a finished run, which is never written over")
    os.makedirs(run_dir, exist_ok=True)
    for old in os.listdir(run_dir):
        path = os.path.join(run_dir, old)
        if os.path.isdir(path) and not os.path.islink(path):
            raise RunError(f"{path}: a directory in a run's directory, which holds only the files a run writes")
        os.unlink(path)
    topo, link_ends = topology(scenario.topology, scenario.hosts_per_side)
    spec = scenario.qdisc_spec(case.discipline)
    seed = zlib.crc32(f"{scenario.name}/{case.name}/{rep}".encode())
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=os.path.join(run_dir, "controller.log"),
                     db_path=os.path.join(run_dir, "policy.sqlite"))
    record = {**failed_record(scenario, case, rep, None), **(made_by or {})}
    record.update({"qdisc": spec, "seed": seed, "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    with contextlib.ExitStack() as stack:
        stack.enter_context(ctl)
        net = stack.enter_context(mininet_net(topo, ctl, discovery_wait_s=0))
        spec = spec_with_addresses(spec, lambda host: net.get(host).IP())
        record["qdisc"] = spec
        # Every link gets every host's delay: a flow crosses one of them (dumbbell: the one;
        # twopaths: the path it takes), and a host's frames only ever come from its own side.
        host_delays = {net.get(h).IP(): ms for h, ms in scenario.access_delay_ms.items()}
        links = {}
        for name, bridge_a, port_a, bridge_b, port_b in link_ends:
            links[name] = stack.enter_context(SwitchLink(
                bridge_a, port_a, bridge_b, port_b, rate_bps=scenario.link.rate_bps,
                delay_ms=scenario.link.delay_ms, qdisc=spec, name=name,
                log_path=os.path.join(run_dir, f"link-{name}.jsonl"), log_interval_ms=LOG_INTERVAL_MS,
                seed=seed, release_batch_us=scenario.link.release_batch_us,
                release_lateness_us=scenario.link.release_lateness_us, host_delay_ms=host_delays))
        time.sleep(3.0)  # LLDP (every second) finds the links through the daemons
        loss = net.pingAll(timeout=2)
        if loss > 0:
            time.sleep(2.0)
            loss = net.pingAll(timeout=2)
            if loss > 0:
                raise RunError(f"pingall lost {loss:.0f} % before traffic: the lab does not forward")
        record["policy"] = apply_policy(CoexClient(ctl.rest_url), scenario, case, net, link_ends)
        for host in net.hosts:
            host.cmd("ip tcp_metrics flush all >/dev/null 2>&1")
        record["host_setup"] = host_setup(scenario, net)
        senders = sorted({f.src for f in scenario.flows})
        before = {h: tcp_counters(net.get(h)) for h in senders}
        record.update(_traffic(scenario, net, links, run_dir, progress))
        record["tcp_counters"] = {h: {k: tcp_counters(net.get(h)).get(k, 0) - v for k, v in before[h].items()}
                                  for h in senders}
    record["error"] = None
    record["metrics"] = analysis.run_metrics(record)
    write_json(os.path.join(run_dir, "run.json"), record)
    return record


def host_setup(scenario: Scenario, net) -> dict:
    """The scenario's per-host settings, per-namespace sysctls: TCP's SACK, and ECN - 1 (ask for
    it) on a host that sends ECN-capable flows, else 2 (Linux's default: accept it when asked,
    never ask). The access delays are the links' (--host-delay), recorded here beside them."""
    sack = 1 if scenario.tcp_sack else 0
    ecn_senders = {f.src for f in scenario.flows if f.ecn}
    tcp_ecn = {}
    for host in net.hosts:
        tcp_ecn[host.name] = 1 if host.name in ecn_senders else 2
        for key, value in (("tcp_sack", sack), ("tcp_ecn", tcp_ecn[host.name])):
            host.cmd(f"sysctl -qw net.ipv4.{key}={value}")
            if host.cmd(f"sysctl -n net.ipv4.{key}").strip() != str(value):
                raise RunError(f"{host.name}: net.ipv4.{key} did not take the value {value}")
    return {"tcp_sack": scenario.tcp_sack, "tcp_ecn": tcp_ecn, "access_delay_ms": dict(scenario.access_delay_ms)}


# The kernel's TCP counters a run records per sending host (/proc/net/netstat, TcpExt: the
# host's network namespace): segments delivered, and those acknowledged with ECE - the CE marks
# the receiver echoed, i.e. the congestion signals an ECN sender saw.
TCP_COUNTERS = {"TCPDelivered": "delivered", "TCPDeliveredCE": "delivered_ce"}


def tcp_counters(host) -> dict:
    """TCP_COUNTERS of a Mininet host's namespace now ({} if /proc/net/netstat says none)."""
    return parse_netstat(host.cmd("cat /proc/net/netstat"))


def parse_netstat(text: str) -> dict:
    """TCP_COUNTERS from /proc/net/netstat's TcpExt header and value lines."""
    lines = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0][1:], lines[1][1:]))
    return {name: int(values[key]) for key, name in TCP_COUNTERS.items() if key in values}


def apply_policy(api: CoexClient, scenario: Scenario, case: Case, net, link_ends) -> dict | None:
    """The CoEx policy of a case through the controller's REST API. Scenarios with aggregates get
    the same rules and bottleneck ports in every case; only the approach differs."""
    if not any(f.aggregate for f in scenario.flows):
        return None
    for f in scenario.flows:
        if f.aggregate:
            api.ok("POST", "/rules", {"name": f"flow-{f.port}", "aggregate": f.aggregate,
                                      "match": {"ip_proto": 6, "tp_dst": f.port}})
    ping = scenario.ping
    if ping and ping.aggregate:  # ping shares the aggregate it measures
        api.ok("POST", "/rules", {"name": "ping", "aggregate": ping.aggregate,
                                  "match": {"ip_proto": 1, "ipv4_src": net.get(ping.src).IP(),
                                            "ipv4_dst": net.get(ping.dst).IP()}})
    for _, bridge, port, _, _ in link_ends:
        dpid = int(bridge[1:])
        api.ok("PUT", f"/ports/{dpid}/{port}", {"capacity_bps": scenario.link.rate_bps})
    if case.approach == "separate_paths":
        api.ok("PUT", "/approaches", {"separate_paths": True})
    elif case.approach == "separate_queues":
        api.ok("PUT", "/approaches", {"separate_queues": True})
    elif case.approach == "limited_queue":
        api.ok("PUT", "/approaches", {"limited_queue": {"enabled": True, "aggregate": "queue_filling",
                                                        "fraction": scenario.limited_queue_fraction}})
    time.sleep(0.5)
    return api.ok("GET", "/policy")


# --- traffic and collection ------------------------------------------------------------------

def _traffic(scenario: Scenario, net, links: dict, run_dir: str, progress: Progress | None) -> dict:
    """The measured part of a run: iperf3 servers, the samplers, ping, then each flow's client at
    its start time; waits for the clients, stops everything it started and returns what the
    flows, links, ping and CPU recorded."""
    controls = {name: LinkControl(link.control_path) for name, link in links.items()}
    started = _Started()
    try:
        _start_servers(started, scenario.flows, net)
        time.sleep(0.5)
        daemon_zero = _daemon_clock_zeros(controls)
        t0 = time.monotonic()
        wall0 = time.time()
        cpu = CpuSampler(t0, [_vswitchd_pid(), os.getpid()] + [links[n].daemon.pid for n in links], started.stop)
        sampler = SojournSampler(controls, daemon_zero, t0, started.stop)
        senders = sorted({f.src for f in scenario.flows})
        tcp = TcpInfoSampler({h: net.get(h) for h in senders},
                             {h: {client_port(f): f.port for f in scenario.flows if f.src == h} for h in senders},
                             t0, scenario.tcp_info_interval_s, started.stop)
        started.start_threads(cpu.run, sampler.run, tcp.run)
        applied: list[dict] = []
        if scenario.link_changes:
            started.start_threads(lambda: _change_links_on_time(controls, scenario, t0, started.stop, applied))
        if scenario.ping:
            _start_ping(started, scenario, net, run_dir)
        short_t0 = _start_short_flows(started, scenario, net, run_dir, t0)
        clients, launched = _start_clients_on_time(started, scenario, net, run_dir, t0, progress)
        _wait_for_clients(clients, FLOW_GRACE_S)
        stats = {name: c.stats("ab", max_flows=256) for name, c in controls.items()}
    finally:
        started.end()
    finals = {name: link.stop() for name, link in links.items()}
    return {
        "t0_wall": wall0,
        "flows": [_flow_record(f, launched.get(i), run_dir, stats, tcp.series.get(f.port, []))
                  for i, f in enumerate(scenario.flows)],
        "links": {name: _link_record(name, run_dir, daemon_zero[name] - t0, stats[name], finals[name],
                                     sampler.values.get(name, []))
                  for name in links},
        "ping": _ping_series(os.path.join(run_dir, "ping.txt"), wall0) if scenario.ping else [],
        "tcp_info_errors": tcp.errors,
        **({"short_flows": [_short_flow_record(g, run_dir, short_t0) for g in scenario.short_flows]}
           if scenario.short_flows else {}),
        "cpu": cpu.series,
        **({"link_changes": applied} if scenario.link_changes else {}),
    }


def _change_links_on_time(controls: dict, scenario: Scenario, t0: float, stop: threading.Event,
                          applied: list[dict]) -> None:
    """Each [[link_changes]] entry at its time, on every bottleneck link (both directions);
    `applied` records when each took effect, in seconds since t0."""
    for change in scenario.link_changes:
        if stop.wait(max(0.0, t0 + change.at_s - time.monotonic())):
            return
        for control in controls.values():
            control.set_link(rate_bps=change.rate_bps, delay_ms=change.delay_ms)
        applied.append({"at_s": round(time.monotonic() - t0, 3), "rate_bps": change.rate_bps,
                        "delay_ms": change.delay_ms})


class _Started:
    """What the traffic phase started: processes, the files they write to, sampler threads (which
    run until `stop` is set). `end()` stops all of it, whatever failed on the way (Ctrl-C too)."""

    def __init__(self):
        self.stop = threading.Event()
        self.procs: list[subprocess.Popen] = []
        self.files: list = []
        self.sampler_threads: list[threading.Thread] = []

    def popen(self, host, cmd: list[str], out_path: str | None = None) -> subprocess.Popen:
        """`cmd` on a Mininet host, its output (stderr too) into out_path, or discarded."""
        if out_path is None:
            proc = host.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            out = open(out_path, "w")
            self.files.append(out)
            proc = host.popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_threads(self, *targets) -> None:
        threads = [threading.Thread(target=t, daemon=True) for t in targets]
        self.sampler_threads += threads
        for t in threads:
            t.start()

    def end(self) -> None:
        self.stop.set()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
        for t in self.sampler_threads:
            t.join(timeout=5)
        for f in self.files:
            f.close()


def _start_servers(started: _Started, flows: list[Flow], net) -> None:
    for f in flows:  # -1: each serves one client and exits
        started.popen(net.get(f.dst), ["iperf3", "-s", "-1", "-J", "-p", str(f.port)])


def _daemon_clock_zeros(controls: dict) -> dict[str, float]:
    """Where each link daemon's clock (log t, sample t_s) started, on our monotonic clock."""
    zeros = {}
    for name, control in controls.items():
        before = time.monotonic()  # read before the request: uptime is at most that old
        zeros[name] = before - control.ping()["uptime_s"]
    return zeros


def _start_short_flows(started: _Started, scenario: Scenario, net, run_dir: str, t0: float) -> float | None:
    """Each [[short_flows]] group's server on its sending host and its client on its receiving
    host, started now; the client waits until the group's start_s. Returns when the clients
    started (seconds since t0), which their transfer times count from."""
    if not scenario.short_flows:
        return None
    for g in scenario.short_flows:
        started.popen(net.get(g.src), [sys.executable, "-m", "experiments.run.probes.shortflows", "serve", "--port",
                                       str(g.port), "--cc", g.cc], os.path.join(run_dir, f"short-serve-{g.port}.txt"))
    time.sleep(0.5)  # the servers listen before the first request can come (start_s may be 0)
    launched = time.monotonic() - t0
    for g in scenario.short_flows:
        started.popen(net.get(g.dst), [sys.executable, "-m", "experiments.run.probes.shortflows", "fetch", "--host",
                                       net.get(g.src).IP(), "--port", str(g.port),
                                       "--sizes-kb", ",".join(f"{s:g}" for s in g.sizes_kb),
                                       "--rate", f"{g.rate_per_s:g}", "--duration", f"{g.stop_s - g.start_s:g}",
                                       "--seed", str(zlib.crc32(f"{scenario.name}/{g.label}".encode())),
                                       "--start-after", f"{max(0.0, g.start_s - launched):g}"]
                      + ([] if g.poisson else ["--interval"]), os.path.join(run_dir, f"short-{g.port}.jsonl"))
    return launched


def _short_flow_record(g, run_dir: str, launched_s: float) -> dict:
    """A [[short_flows]] group's transfers, their start times in seconds since t0. A transfer
    still running when the run ended has no line: counted as unfinished by the analysis."""
    rec = {"label": g.label, "src": g.src, "dst": g.dst, "cc": g.cc, "port": g.port, "transfers": [],
           "error": None}
    try:
        lines = open(os.path.join(run_dir, f"short-{g.port}.jsonl")).read().splitlines()
    except OSError as err:
        rec["error"] = f"no client output: {err.strerror}"
        return rec
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a traceback, or a line cut by the kill at the end
        if isinstance(row, dict) and "t" in row and "size" in row:
            row["t"] = round(launched_s + row["t"], 3)
            rec["transfers"].append(row)
    return rec


def _start_ping(started: _Started, scenario: Scenario, net, run_dir: str) -> None:
    """Ping for the whole run, each reply stamped with the wall clock (-D)."""
    ping = scenario.ping
    src, dst = net.get(ping.src), net.get(ping.dst)
    started.popen(src, ["ping", "-n", "-D", "-i", f"{ping.interval_s:g}", "-w", f"{scenario.duration_s:g}",
                        dst.IP()], os.path.join(run_dir, "ping.txt"))


def _start_clients_on_time(started: _Started, scenario: Scenario, net, run_dir: str, t0: float,
                           progress: Progress | None) -> tuple[list[subprocess.Popen], dict[int, float]]:
    """Start each flow's client once its start_s has come (looked at every 0.2 s) until all have
    started and the run's duration is over. Returns the clients in start order, and when each
    flow (by its index in scenario.flows) started, in seconds since t0."""
    flows = scenario.flows
    pending = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    clients: list[subprocess.Popen] = []
    launched: dict[int, float] = {}
    end = t0 + scenario.duration_s
    while True:
        now = time.monotonic()
        while pending and now >= t0 + flows[pending[0]].start_s:
            i = pending.pop(0)
            clients.append(_start_client(started, flows[i], net, run_dir))
            launched[i] = time.monotonic() - t0
        if progress:
            progress.tick(now - t0)
        if now >= end and not pending:
            return clients, launched
        time.sleep(0.2)


def _start_client(started: _Started, f: Flow, net, run_dir: str) -> subprocess.Popen:
    # -J --get-server-output: the receiver's per-second goodput comes back in the client's JSON
    # --cport: the data connection's own port, by which the ss sampler tells it from iperf3's
    # control connection to the same server port
    cmd = ["iperf3", "-c", net.get(f.dst).IP(), "-p", str(f.port), "--cport", str(client_port(f)),
           "-t", f"{f.duration_s:g}", "-C", f.cc, "-J", "--get-server-output", "-i", "1"]
    if f.rate_bps:
        cmd += ["-b", str(f.rate_bps)]
    return started.popen(net.get(f.src), cmd, os.path.join(run_dir, f"iperf3-{f.port}.json"))


CLIENT_PORT_OFFSET = 20000  # a flow's iperf3 data connection leaves from its server port + this


def client_port(f: Flow) -> int:
    return f.port + CLIENT_PORT_OFFSET


def _wait_for_clients(clients: list[subprocess.Popen], grace_s: float) -> None:
    """Until every client has exited, or grace_s for all of them together (those still running
    are killed with the rest)."""
    deadline = time.monotonic() + grace_s
    for proc in clients:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def _flow_record(f, launched_s: float | None, run_dir: str, stats: dict, tcp_info: list) -> dict:
    rec = {"label": f.label, "cc": f.cc, "src": f.src, "dst": f.dst, "port": f.port, "aggregate": f.aggregate,
           "ecn": f.ecn,
           "start_s": f.start_s, "stop_s": f.stop_s, "rate_bps": f.rate_bps, "launched_s": launched_s,
           "goodput": [], "srtt": [], "tcp_info": tcp_info, "error": None,
           "min_rtt_ms": min((row[3] for row in tcp_info if row[3] is not None), default=None)}
    path = os.path.join(run_dir, f"iperf3-{f.port}.json")
    try:
        text = open(path).read()
        report = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        rec["error"] = "iperf3 gave no JSON" + (f" (it started at {launched_s:.1f} s)" if launched_s else
                                               " (never started)")
        return rec
    if "error" in report:
        rec["error"] = f"iperf3: {report['error']}"
        return rec
    base = launched_s or 0.0
    server = report.get("server_output_json") or {}
    for iv in server.get("intervals", []):
        s = iv["sum"]
        if s["seconds"] > 0.2:
            rec["goodput"].append([round(base + (s["start"] + s["end"]) / 2, 3), s["bytes"] * 8 / s["seconds"] / 1e6,
                                   round(s["seconds"], 6)])
    for iv in report.get("intervals", []):
        st = iv["streams"][0]
        if "rtt" in st and st["seconds"] > 0.2:
            rec["srtt"].append([round(base + (st["start"] + st["end"]) / 2, 3), st["rtt"] / 1000.0])
    end = report["end"]
    rec["goodput_total_mbps"] = end["sum_received"]["bits_per_second"] / 1e6
    rec["retransmits"] = end.get("sum_sent", {}).get("retransmits")
    rec["sender_cc"] = end.get("sender_tcp_congestion")
    conn = report["start"]["connected"][0]
    key = f"tcp {conn['local_host']}:{conn['local_port']}>{conn['remote_host']}:{conn['remote_port']}"
    rec["key"] = key
    rec["link_drops"], rec["link_marks"] = {}, {}
    for name, st in stats.items():
        for fl in st["dirs"]["ab"].get("flows", []):
            if fl["key"] == key:
                rec["link_drops"][name] = fl["drops"]
                rec["link_marks"][name] = fl.get("marks", {})
    return rec


def _link_record(name: str, run_dir: str, offset_s: float, stats: dict, final: dict | None,
                 sojourn_samples: list) -> dict:
    series = []
    ckcd = CkcdStateReader()
    path = os.path.join(run_dir, f"link-{name}.jsonl")
    with contextlib.suppress(OSError):
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("dir") != "ab":
                    continue
                soj = row.get("sojourn_us") or {}
                ckcd.add(round(row["t"] + offset_s, 3), row)
                series.append({"t": round(row["t"] + offset_s, 3), "interval_s": row["interval_s"],
                               "qlen_pkts": row["qlen_pkts"], "qlen_bytes": row.get("qlen_bytes"),
                               "tx_bytes": row["tx_bytes"],
                               "sojourn_ms": soj["mean"] / 1000 if soj.get("count") else None,
                               "sojourn_count": soj.get("count", 0), "drops": row.get("drops", {}),
                               "marks": row.get("marks", {})})
    ab = stats["dirs"]["ab"]
    if len(sojourn_samples) > MAX_STORED_SAMPLES:  # an even subsample keeps the percentiles
        step = len(sojourn_samples) / MAX_STORED_SAMPLES
        sojourn_samples = [sojourn_samples[int(k * step)] for k in range(MAX_STORED_SAMPLES)]
    return {"series": series, "sojourn_samples": sojourn_samples, "ckcd": ckcd.points,
            "final": final, "stats_ab": {k: ab.get(k) for k in ("rate_bps", "delay_ms", "qdisc", "drops", "marks",
                                                                "tx_bytes", "sojourn_us", "schedule",
                                                                "tx_wake", "nflows", "rx_io",
                                                                "rx_kernel_drops")}}


def _ping_series(path: str, wall0: float) -> list:
    out = []
    with contextlib.suppress(OSError):
        for line in open(path):
            # [1795317446.123456] 64 bytes from 10.0.0.3: icmp_seq=1 ttl=64 time=20.4 ms
            if line.startswith("[") and "time=" in line:
                stamp = float(line[1:line.index("]")])
                rtt = float(line.split("time=")[1].split()[0])
                out.append([round(stamp - wall0, 3), rtt])
    return out


def _vswitchd_pid() -> int | None:
    try:
        with open("/run/ckcd-coex/ovs/ovs-vswitchd.pid") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class SojournSampler:
    """ckcd-link's last 1024 dequeues of the bottleneck direction every SAMPLE_PERIOD_S: every
    dequeue up to ~2000 packets/s, an evenly spread sample above (100 Mbit/s is ~8300/s)."""

    def __init__(self, controls: dict, daemon_zero: dict, t0: float, stop: threading.Event):
        self.controls, self.daemon_zero, self.t0, self.stop = controls, daemon_zero, t0, stop
        self.values: dict[str, list] = {name: [] for name in controls}
        self.last: dict[str, float] = {name: -1.0 for name in controls}

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_PERIOD_S):
            for name, control in self.controls.items():
                try:
                    samples = control.samples("ab", 1024)
                except Exception:  # the daemon is going away; the log still has the series
                    continue
                offset = self.daemon_zero[name] - self.t0
                for t_s, sojourn_us, _qlen, _len in samples:
                    if t_s > self.last[name]:
                        self.values[name].append([round(t_s + offset, 4), round(sojourn_us / 1000, 3)])
                if samples:
                    self.last[name] = max(self.last[name], samples[-1][0])

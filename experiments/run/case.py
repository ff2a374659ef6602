"""One lab run of one case: a fresh lab on the shared private OVS, traffic, and its record.

  ryu-manager ckcd_coex  +  Mininet topology  +  ckcd-link on every emulated link
  -> pingall (ARP, host learning, paths) -> CoEx policy through REST (scenarios with
  aggregates) -> tcp_metrics flushed on every host -> iperf3 servers, ping, samplers
  -> clients started at their start times -> wait -> collect -> tear down.

Every piece is a context manager or is ended in a `finally`, so Ctrl-C, SIGTERM (mapped to
KeyboardInterrupt by the CLI) and failures leave nothing behind.

What a run collects (all times in seconds since the run's t0, when the first client may start),
each by its probe under run/probes/:
- per flow (iperf.py): the receiver's goodput per second, the sender's smoothed RTT, retransmits;
  its TCP state every tcp_info_interval_s (ss.py); its drops and marks at ckcd-link;
- per link (link.py): ckcd-link's 100 ms log (queue length, sojourn, delivered bytes, drops by
  reason), its dequeue samples (sojourn percentiles), final stats (schedule keeping);
- ping RTT from the scenario's ping source to its destination (ping.py);
- the machine's CPU from /proc/stat every second, and vswitchd's and ckcd-link's share (cpu.py);
- short transfers' completion times (short.py);
- real-time flows' one-way delay, jitter and loss (udp.py).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import zlib

from experiments.analysis import metrics as analysis
from experiments.batch.records import finished, read_record, write_json
from experiments.lab import bpf_cc, mptcp
from experiments.lab.hosts import host_setup, tcp_counters
from experiments.lab.net import Controller, mininet_net
from experiments.lab.policy import apply_policy
from experiments.lab.rest_client import CoexClient
from experiments.lab.topos import topology
from experiments.scenario.link_models import daemon_options
from experiments.run.probes.capture import capture_options, capture_record
from experiments.run.probes.cpu import CpuSampler
from experiments.run.probes.iperf import client_port, flow_record, start_clients_on_time, start_servers, \
    wait_for_clients
from experiments.run.probes.link import SojournSampler, daemon_clock_zeros, link_record
from experiments.run.probes.ping import group_ping_file, ping_series, start_ping
from experiments.run.probes.short import short_flow_record, start_short_flows
from experiments.run.probes.udp import start_udp_flows, udp_flow_record
from experiments.run.probes.ss import TcpInfoSampler
from experiments.run.progress import Progress
from experiments.scenario.model import Case, Scenario, spec_with_addresses
from ovs_config.bottleneck import SwitchLink
from ovs_config.link_daemon import LinkControl


OF_PORT, REST_PORT = 16700, 18200  # not the defaults: a user's own controller may use 6653/8080


LOG_INTERVAL_MS = 100


FLOW_GRACE_S = 20.0


class RunError(RuntimeError):
    pass


def failed_record(scenario: Scenario, case: Case, rep: int, error: str) -> dict:
    return {"scenario": scenario.to_dict(), "case": {"name": case.name, "discipline": case.discipline,
                                                    "approach": case.approach},
            "rep": rep, "error": error, "metrics": None}


def run_case(scenario: Scenario, case: Case, rep: int, run_dir: str, progress: Progress | None = None,
             made_by: dict | None = None) -> dict:
    """One lab run of one case; returns the run record (written to run_dir/run.json), with
    `made_by` (its batch and provenance) in it."""
    _empty_run_dir(run_dir)
    topo, link_ends = topology(scenario.topology, scenario.hosts_per_side, mptcp.extra_interfaces(scenario.flows))
    spec = scenario.qdisc_spec(case.discipline)
    seed = zlib.crc32(f"{scenario.name}/{case.name}/{rep}".encode())
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=os.path.join(run_dir, "controller.log"),
                     db_path=os.path.join(run_dir, "policy.sqlite"))
    record = {**failed_record(scenario, case, rep, None), **(made_by or {})}
    record.update({"qdisc": spec, "seed": seed, "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    with contextlib.ExitStack() as stack:
        # Registered before the lab and unregistered after it is gone: its namespaces and
        # sockets hold the controls until then.
        record["bpf_congestion_controls"] = stack.enter_context(bpf_cc.loaded(
            {f.cc for f in (*scenario.flows, *scenario.short_flows)} & set(bpf_cc.BPF_CONTROLS)))
        stack.enter_context(ctl)
        net = stack.enter_context(mininet_net(topo, ctl, discovery_wait_s=0))
        spec = spec_with_addresses(spec, lambda host: net.get(host).IP())
        record["qdisc"] = spec
        reverse_spec = None
        if scenario.has_reverse_flows:
            reverse_spec = spec_with_addresses(scenario.reverse_qdisc_spec(case.discipline),
                                               lambda host: net.get(host).IP())
            record["qdisc_reverse"] = reverse_spec
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
                release_lateness_us=scenario.link.release_lateness_us, host_delay_ms=host_delays,
                **daemon_options(scenario.link, reverse_spec), **capture_options(scenario.link, run_dir, name)))
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


def _empty_run_dir(run_dir: str) -> None:
    """A failed run's files go; a finished run's never do. A symlink planted among them (or as
    the directory) must not send a root run's deletes and writes elsewhere."""
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


def _traffic(scenario: Scenario, net, links: dict, run_dir: str, progress: Progress | None) -> dict:
    """The measured part of a run: iperf3 servers, the samplers, ping, then each flow's client at
    its start time; waits for the clients, stops everything it started and returns what the
    flows, links, ping and CPU recorded."""
    controls = {name: LinkControl(link.control_path) for name, link in links.items()}
    started = Started()
    try:
        start_servers(started, scenario.flows, net)
        time.sleep(0.5)
        daemon_zero = daemon_clock_zeros(controls)
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
            start_ping(started, scenario, net, run_dir)
        short_t0 = start_short_flows(started, scenario, net, run_dir, t0)
        start_udp_flows(started, scenario, net, run_dir, t0)
        clients, launched = start_clients_on_time(started, scenario, net, run_dir, t0, progress)
        wait_for_clients(clients, FLOW_GRACE_S)
        stats = {name: c.stats("both", max_flows=256) for name, c in controls.items()}
    finally:
        started.end()
    finals = {name: link.stop() for name, link in links.items()}
    records = {name: link_record(name, run_dir, daemon_zero[name] - t0, stats[name], finals[name],
                                 sampler.values.get(name, []), _ping_keys(scenario, net),
                                 {f"{s}>{d}": _icmp_keys(net, s, d) for s, d in scenario.group_pings()})
               for name in links}
    if scenario.link.capture:  # read once the daemons have flushed and closed their files
        for name, rec in records.items():
            rec["capture"] = capture_record(run_dir, name, wall0, scenario.measure_window_s)
    return {
        "t0_wall": wall0,
        "flows": [flow_record(f, launched.get(i), run_dir, stats, tcp.series.get(f.port, []), tcp.subflows.get(f.port))
                  for i, f in enumerate(scenario.flows)],
        "links": records,
        "ping": ping_series(os.path.join(run_dir, "ping.txt"), wall0) if scenario.ping else [],
        **({"group_pings": [{"src": s, "dst": d,
                             "series": ping_series(os.path.join(run_dir, group_ping_file(s, d)), wall0)}
                            for s, d in scenario.group_pings()]} if scenario.group_pings() else {}),
        "tcp_info_errors": tcp.errors,
        **({"short_flows": [short_flow_record(g, run_dir, short_t0) for g in scenario.short_flows]}
           if scenario.short_flows else {}),
        **({"udp_flows": [udp_flow_record(g, run_dir, t0) for g in scenario.udp_flows]} if scenario.udp_flows else {}),
        "cpu": cpu.series,
        **({"link_changes": applied} if scenario.link_changes else {}),
    }


def _ping_keys(scenario: Scenario, net) -> tuple[str, ...]:
    """ckcd-link's flow keys of ping's echo requests and replies (docs/ckcd-link.md: `icmp a>b`)."""
    if not scenario.ping:
        return ()
    return _icmp_keys(net, scenario.ping.src, scenario.ping.dst)


def _icmp_keys(net, src_host: str, dst_host: str) -> tuple[str, str]:
    src, dst = net.get(src_host).IP(), net.get(dst_host).IP()
    return (f"icmp {src}>{dst}", f"icmp {dst}>{src}")


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


class Started:
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


def _vswitchd_pid() -> int | None:
    try:
        with open("/run/ckcd-coex/ovs/ovs-vswitchd.pid") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None

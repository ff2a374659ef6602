"""Characterization tests: what parsing, metrics and the traffic schedule produce today, for fixed
inputs, compared in full with outputs recorded in tests/experiments/pinned/. They hold behaviour
still while the code is reshaped; a change that means to alter an output rewrites the
recording on purpose (`python -m tests.experiments.test_pinned_outputs`) and the diff shows it."""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import types

import pytest

from experiments.analysis import metrics as analysis
from experiments.analysis.summary import full_buffer_ms, headline, summarize

from experiments.run import case
from experiments.run.probes import iperf, link, short
from experiments.output import markdown
from experiments.output.csv_files import flows_csv, summary_csv
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import builtin_names, parse_scenario, resolve

PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pinned")

BASE = {"name": "pin", "topology": "dumbbell", "duration_s": 30, "warmup_s": 5,
        "link": {"rate_mbps": 100, "delay_ms": 10, "buffer_pkts": 80},
        "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}]}


def doc(**over) -> dict:
    return {**BASE, **over}


# Every way a scenario is refused, one document each: the whole message is pinned (it names the
# field), not only the key.
BAD_SCENARIOS = {
    "not_a_table": [],
    "name_missing": {k: v for k, v in BASE.items() if k != "name"},
    "name_chars": doc(name="a b"),
    "name_empty": doc(name=""),
    "title_type": doc(title=3),
    "topology": doc(topology="ring"),
    "duration_type": doc(duration_s="long"),
    "duration_bool": doc(duration_s=True),
    "duration_low": doc(duration_s=0.5),
    "duration_high": doc(duration_s=100000),
    "warmup_negative": doc(warmup_s=-1),
    "warmup_all": doc(warmup_s=30),
    "repeat_low": doc(repeat=0),
    "link_missing": {k: v for k, v in BASE.items() if k != "link"},
    "link_not_table": doc(link=5),
    "link_rate_both": doc(link={"rate_mbps": 10, "rate_bps": 10_000_000, "delay_ms": 1, "buffer_pkts": 8}),
    "link_rate_missing": doc(link={"delay_ms": 1, "buffer_pkts": 8}),
    "link_rate_bps_low": doc(link={"rate_bps": 10, "delay_ms": 1, "buffer_pkts": 8}),
    "link_rate_negative": doc(link={"rate_mbps": -5, "delay_ms": 10, "buffer_pkts": 80}),
    "link_delay_high": doc(link={"rate_mbps": 10, "delay_ms": 20000, "buffer_pkts": 8}),
    "link_trace_and_rate": doc(link={"trace": "onoff", "rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8}),
    "link_trace_path": doc(link={"trace": "../../etc/passwd", "delay_ms": 1, "buffer_pkts": 8}),
    "link_trace_unknown": doc(link={"trace": "nosuch", "delay_ms": 1, "buffer_pkts": 8}),
    "link_loss_model": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8, "loss": "uniform p=0.1"}),
    "link_loss_prob": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8, "loss": "bernoulli p=1.5"}),
    "link_loss_gilbert_r": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8, "loss": "gilbert p=0.1"}),
    "link_reverse_key": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8, "reverse": {"rate": 5}}),
    "short_sizes_two": doc(short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 1, "sizes_kb": [10],
                                         "size_cdf": "websearch"}]),
    "short_cdf_unknown": doc(short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 1,
                                           "size_cdf": "../x"}]),
    "short_cdf_uncapped": doc(short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 1,
                                            "size_cdf": "datamining"}]),
    "short_cap_on_list": doc(short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 1, "sizes_kb": [10],
                                           "size_max_kb": 5}]),
    "short_pareto_bounds": doc(short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 1,
                                             "size_pareto": {"shape": 1.2, "min_kb": 10, "max_kb": 10}}]),
    "udp_too_many_packets": doc(udp_flows=[{"src": "h1", "dst": "h3", "rate_mbps": 100, "packet_bytes": 100}]),
    "udp_packet_too_big": doc(udp_flows=[{"src": "h1", "dst": "h3", "rate_mbps": 1, "packet_bytes": 9000}]),
    "udp_wrong_side": doc(udp_flows=[{"src": "h3", "dst": "h1", "rate_mbps": 1}]),
    "udp_stop_before_start": doc(udp_flows=[{"src": "h1", "dst": "h3", "rate_mbps": 1, "start_s": 10, "stop_s": 5}]),
    "link_trace_changed_rate": doc(link={"trace": "onoff", "delay_ms": 1, "buffer_pkts": 8},
                                   link_changes=[{"at_s": 10, "rate_mbps": 20}]),
    "link_buffer_low": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 0}),
    "link_unknown": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8, "loss": 0.1}),
    "link_release_batch_negative": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8,
                                             "release_batch_us": -1}),
    "link_release_batch_high": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8,
                                         "release_batch_us": 20000}),
    "link_release_batch_type": doc(link={"rate_mbps": 10, "delay_ms": 1, "buffer_pkts": 8,
                                         "release_batch_us": "1ms"}),
    "disciplines_type": doc(disciplines="ckcd"),
    "disciplines_unknown": doc(disciplines=["droptail", "nosuch"]),
    "disciplines_empty": doc(disciplines=[]),
    "disciplines_twice": doc(disciplines=["ckcd", "ckcd"]),
    "approaches_unknown": doc(approaches=["magic"]),
    "approaches_empty": doc(approaches=[]),
    "approaches_twice": doc(approaches=["none", "none"]),
    "separate_paths_dumbbell": doc(approaches=["separate_paths"]),
    "params_not_table": doc(discipline_params=3),
    "params_unknown_discipline": doc(discipline_params={"nosuch": {}}),
    "params_not_inner_table": doc(discipline_params={"ckcd": 3}),
    "params_nested": doc(discipline_params={"ckcd": {"limit": [1]}}),
    "params_bool": doc(discipline_params={"ckcd": {"limit": True}}),
    "params_typo": doc(disciplines=["ckcd"], discipline_params={"ckcd": {"limt": 80}}),
    "coex_fraction": doc(coex={"limited_queue_fraction": 2}),
    "coex_unknown": doc(coex={"fraction": 0.5}),
    "flows_missing": {k: v for k, v in BASE.items() if k != "flows"},
    "flows_empty": doc(flows=[]),
    "flow_not_table": doc(flows=["h1"]),
    "flow_src": doc(flows=[{"src": "h9", "dst": "h3", "cc": "cubic"}]),
    "flow_dst": doc(flows=[{"src": "h1", "dst": "h1", "cc": "cubic"}]),
    "flow_cc": doc(flows=[{"src": "h1", "dst": "h3", "cc": "vegas"}]),
    "flow_count": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "count": 65}]),
    "flow_stop_late": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "stop_s": 31}]),
    "flow_stop_before_start": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "start_s": 5, "stop_s": 5}]),
    "flow_start_every": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "count": 4, "start_every_s": 10}]),
    "flow_aggregate": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "aggregate": "gold"}]),
    "flow_rate_both": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "rate_mbps": 1, "rate_bps": 10**6}]),
    "flow_label_type": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "label": 7}]),
    "flow_unknown": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "colour": "red"}]),
    "second_flow": doc(flows=[{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h2", "dst": "h4"}]),
    "ping_not_table": doc(ping="h1"),
    "ping_src": doc(ping={"src": "h3", "dst": "h4"}),
    "ping_interval": doc(ping={"src": "h1", "dst": "h3", "interval_s": 0.001}),
    "ping_unknown": doc(ping={"src": "h1", "dst": "h3", "count": 3}),
    "unknown_key": doc(colour="red"),
    "approaches_need_aggregates": doc(approaches=["separate_queues"]),
}

# Accepted documents that use every option, parsed in full.
GOOD_SCENARIOS = {
    "everything": {
        "name": "every-thing_1", "title": "All options", "source": "a paper", "notes": "n", "topology": "twopaths",
        "duration_s": 60, "warmup_s": 8, "repeat": 3,
        "disciplines": ["droptail", "red", "ckcd"], "approaches": ["none", "separate_paths", "limited_queue"],
        "link": {"rate_bps": 20_000_000, "delay_ms": 5, "buffer_pkts": 50},
        "discipline_params": {"ckcd": {"limit": 120}, "red": {}},
        "coex": {"limited_queue_fraction": 0.3},
        "flows": [{"src": "h1", "dst": "h3", "cc": "bbr", "aggregate": "queue_filling"},
                  {"src": "h2", "dst": "h4", "cc": "cubic", "count": 3, "start_s": 2, "start_every_s": 4,
                   "stop_s": 50, "aggregate": "low_delay", "rate_mbps": 2.5},
                  {"src": "h1", "dst": "h4", "cc": "bbr", "label": "late"},
                  {"src": "h2", "dst": "h3", "cc": "bbr"}],
        "ping": {"src": "h2", "dst": "h4", "interval_s": 0.5, "aggregate": "low_delay"}},
    "defaults": BASE,
    "duplicate_labels": doc(flows=[{"src": "h1", "dst": "h3", "cc": "bbr"}, {"src": "h2", "dst": "h4", "cc": "cubic"},
                                   {"src": "h1", "dst": "h4", "cc": "bbr"}, {"src": "h2", "dst": "h3", "cc": "reno",
                                                                             "label": "bbr"}]),
    "udp": doc(udp_flows=[{"src": "h1", "dst": "h3", "rate_mbps": 2, "label": "video"},
                          {"src": "h2", "dst": "h4", "rate_bps": 64000, "packet_bytes": 160, "start_s": 5, "stop_s": 20}]),
    "short_workloads": doc(short_flows=[
        {"src": "h1", "dst": "h3", "cc": "cubic", "rate_per_s": 2, "size_cdf": "websearch", "label": "web"},
        {"src": "h2", "dst": "h4", "cc": "bbr", "rate_per_s": 1, "size_cdf": "datamining", "size_max_kb": 10000},
        {"src": "h1", "dst": "h4", "cc": "reno", "rate_per_s": 1, "label": "tail",
         "size_pareto": {"shape": 1.2, "min_kb": 10, "max_kb": 10000}}]),
    "link_models": doc(link={"trace": "sawtooth", "delay_ms": 10, "buffer_pkts": 80, "loss": "gilbert  p=0.01 r=0.25",
                             "reverse": {"rate_mbps": 5, "delay_ms": 20, "buffer_pkts": 30, "loss": "bernoulli p=0.001"}}),
}


def scenario_outputs() -> dict:
    refused = {}
    for name, bad in BAD_SCENARIOS.items():
        with pytest.raises(ScenarioError) as err:
            parse_scenario(bad, "pin.toml")
        refused[name] = {"message": str(err.value), "key": err.value.key}
    return {"refused": refused,
            "parsed": {name: parse_scenario(good, "pin.toml").to_dict() for name, good in GOOD_SCENARIOS.items()},
            "builtin": {name: resolve(name).to_dict() for name in builtin_names()}}


# --- run metrics -------------------------------------------------------------------------------------

METRICS_DOC = {"name": "met", "topology": "dumbbell", "duration_s": 40, "warmup_s": 10,
               "disciplines": ["droptail", "ckcd"], "approaches": ["none", "separate_queues"],
               "link": {"rate_mbps": 100, "delay_ms": 10, "buffer_pkts": 80},
               "flows": [{"src": "h1", "dst": "h3", "cc": "bbr", "aggregate": "queue_filling"},
                         {"src": "h2", "dst": "h4", "cc": "cubic", "aggregate": "low_delay", "count": 2},
                         {"src": "h1", "dst": "h4", "cc": "reno"}],
               "ping": {"src": "h1", "dst": "h3"}}


def metrics_record(case: str, approach: str, shift: float, cpu_columns: int = 6, final: bool = True,
                   late: int = 0, ping_extra_ms: float = 0.0, steal: float = 1.0, flow_error: bool = False,
                   busy_base: float = 30.0) -> dict:
    """A run record in run.json's shape with uneven numbers (so sums and orders matter)."""
    sc = parse_scenario(METRICS_DOC, "met.toml")
    secs = [t + 0.37 for t in range(40)]
    flows = []
    for k, f in enumerate(sc.flows):
        err = "iperf3 gave no JSON (never started)" if flow_error and k == 3 else None
        goodput = [] if err else [[t, (k + 1) * 7.3 + shift + (t % 3) * 0.41, 1.0 if t < 39 else 0.63] for t in secs]
        flows.append({"label": f.label, "cc": f.cc, "aggregate": f.aggregate, "error": err,
                      "retransmits": None if err else 11 * k,
                      "goodput": goodput, "srtt": [] if err else [[t, 20.0 + k + (t % 5) * 0.13] for t in secs],
                      "link_drops": {} if err else {"l0": {"overflow": k, "early": 2 * k}, "l1": {"overflow": 1}}})
    links = {}
    for j, name in enumerate(("l0", "l1")):
        series = [{"t": t / 10, "interval_s": 0.1, "qlen_pkts": 10 + (t + j) % 7,
                   "tx_bytes": 1_000_000 + 977 * ((t * (j + 3)) % 11),
                   "sojourn_ms": None if t % 13 == 0 else 1.0 + shift / 10 + (t % 9) * 0.21,
                   "sojourn_count": 0 if t % 13 == 0 else 700 + t % 17,
                   "drops": {"overflow": t % 3, "early": (t + j) % 2} if t % 4 else {"overflow": 1}}
                  for t in range(400)]
        samples = [[t / 100, 0.5 + ((t * 7) % 23) * 0.17 + j] for t in range(4000)]
        dirs = {"ab": {"schedule": {"releases": 4000, "late_over_1ms": late, "late_mean_us": 90.0 + j}},
                "ba": {"schedule": {"releases": 1000, "late_over_1ms": 0, "late_mean_us": 40.0}}}
        links[name] = {"series": series, "sojourn_samples": samples,
                       "final": {"dirs": dirs} if final or j == 0 else None}
    # [t, busy %, steal %, vswitchd, runner, links]; records from before the runner's own column
    # have five, and a vswitchd without a pid file left None in some
    cpu = [[t, busy_base + (t * 7) % 60, steal + (t % 4) * 0.5, None if t % 10 == 3 else 20.0 + t % 3,
            3.0 + t % 2][:cpu_columns - 1] + [30.0 + t % 5] for t in range(40)]
    return {"scenario": sc.to_dict(), "case": {"name": case, "discipline": case.split("+")[0], "approach": approach},
            "rep": 1, "error": None, "flows": flows, "links": links, "cpu": cpu,
            "ping": [[t / 5, 20.0 + shift / 4 + ping_extra_ms + (t % 7) * 0.3] for t in range(200)]}


METRICS_RECORDS = {
    "plain": lambda: metrics_record("droptail", "none", 0.0),
    "legacy_cpu_rows": lambda: metrics_record("ckcd", "none", 1.5, cpu_columns=5),
    "no_final_late_steal": lambda: metrics_record("droptail", "none", 0.5, final=False, late=400, steal=15.0),
    "rtt_excess_flow_error": lambda: metrics_record("ckcd+separate_queues", "separate_queues", 2.0,
                                                    ping_extra_ms=9.0, flow_error=True),
    "saturated": lambda: metrics_record("separate_queues", "separate_queues", 3.0, steal=60.0, busy_base=40.0),
}


def metrics_outputs(monkeypatch) -> dict:
    records = {name: make() for name, make in METRICS_RECORDS.items()}
    per_run = {name: analysis.run_metrics(rec) for name, rec in records.items()}
    for name, rec in records.items():
        rec["metrics"] = per_run[name]
    runs = list(records.values())
    runs.append({**metrics_record("ckcd", "none", 0.0), "error": "RunError: pingall lost 100 %", "metrics": None})
    summary = summarize(runs)
    head = headline(summary, {r["scenario"]["name"]: full_buffer_ms(r["scenario"]) for r in runs})
    return {"run_metrics": per_run, "summary": summary, "headline": head,
            "summary_csv": _written(summary_csv, summary), "flows_csv": _written(flows_csv, runs),
            "report_md": _report_markdown(monkeypatch, runs, summary, head)}


def _report_markdown(monkeypatch, runs, summary, head) -> str:
    """report.md without the plots, on a machine and at a time that do not vary."""
    monkeypatch.setattr(markdown.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(markdown.platform, "node", lambda: "labhost")
    monkeypatch.setattr(markdown.platform, "release", lambda: "6.18.0")
    when = types.SimpleNamespace(now=lambda: datetime.datetime(2026, 11, 23, 20, 0, 0))
    monkeypatch.setattr(markdown, "datetime", types.SimpleNamespace(datetime=when))
    plots = {"met": ["plots/met_timeseries.png", "plots/met_bars.png"]}
    return _written(lambda path, _: markdown.write_markdown(path, runs, summary, head, plots, "ckcd-coex run met", []), None)


def _written(write, data) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out")
        write(path, data)
        with open(path) as f:
            return f.read()


# --- the traffic schedule, on a fake lab and a fake clock --------------------------------------------------

TRAFFIC_DOC = {"name": "traffic", "topology": "dumbbell", "duration_s": 3, "warmup_s": 1,
               "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80},
               "flows": [{"src": "h2", "dst": "h4", "cc": "cubic", "start_s": 1.3},
                         {"src": "h1", "dst": "h3", "cc": "bbr", "rate_mbps": 20},
                         {"src": "h1", "dst": "h4", "cc": "reno", "start_s": 0.5, "stop_s": 2.5}],
               "ping": {"src": "h2", "dst": "h3", "interval_s": 0.2}}


class FakeClock:
    """time.monotonic/time/sleep for the runner: sleeping advances the clock at once."""

    WALL0 = 1_795_000_000.0

    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now

    def time(self):
        return self.WALL0 + self.now

    def sleep(self, s):
        self.now += s


class FakeProc:
    def __init__(self):
        self.returncode = None

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        self.returncode = 0
        return 0

    def kill(self):
        self.returncode = -9


class FakeHost:
    def __init__(self, name, clock, launches):
        self.name, self.clock, self.launches = name, clock, launches

    def IP(self):
        return f"10.0.0.{self.name[1:]}"

    def popen(self, cmd, stdout=None, stderr=None):
        self.launches.append([round(self.clock.now - 100.0, 3), self.name, list(cmd)])
        if cmd[:2] == ["iperf3", "-c"]:
            stdout.write(_iperf3_report(self.IP(), int(cmd[cmd.index("-p") + 1])))
        elif cmd[0] == "ping":
            for seq in range(3):
                stdout.write(f"[{FakeClock.WALL0 + self.clock.now + seq * 0.2:.6f}] 64 bytes from 10.0.0.3: "
                             f"icmp_seq={seq + 1} ttl=64 time={20.1 + seq:.1f} ms\n")
        return FakeProc()


def _iperf3_report(src_ip: str, port: int) -> str:
    intervals = [{"sum": {"start": s, "end": s + 1.0, "seconds": 1.0, "bytes": 1_000_000 + port}}
                 for s in range(2)] + [{"sum": {"start": 2.0, "end": 2.1, "seconds": 0.1, "bytes": 9}}]
    report = {"start": {"connected": [{"local_host": src_ip, "local_port": 40000 + port, "remote_host": "10.0.0.3",
                                        "remote_port": port}]},
              "intervals": [{"streams": [{"start": s, "end": s + 1.0, "seconds": 1.0, "rtt": 21000 + port}]}
                            for s in range(2)],
              "end": {"sum_received": {"bits_per_second": 8e6 + port}, "sum_sent": {"retransmits": port % 7},
                      "sender_tcp_congestion": "cubic"},
              "server_output_json": {"intervals": intervals}}
    return "warning: junk before the JSON\n" + json.dumps(report)


class FakeControl:
    def __init__(self, path):
        self.path = path

    def ping(self):
        return {"uptime_s": 7.5}

    def stats(self, direction, max_flows=0):
        return {"dirs": {"ab": {"rate_bps": 50_000_000, "delay_ms": 10, "qdisc": "droptail", "drops": {"overflow": 3},
                                "tx_bytes": 123, "sojourn_us": {"mean": 5.0}, "schedule": {}, "tx_wake": 1,
                                "nflows": 2, "flows": [{"key": "tcp 10.0.0.1:45202>10.0.0.3:5202",
                                                        "drops": {"overflow": 2}}]},
                         "ba": {"flows": []}}}

    def samples(self, direction, n):
        return []


class FakeLink:
    def __init__(self, name):
        self.control_path = f"/nonexistent/{name}.sock"
        self.daemon = types.SimpleNamespace(pid=None)

    def stop(self):
        return {"dirs": {"ab": {"schedule": {"releases": 10, "late_over_1ms": 0, "late_mean_us": 1.0}}}}


class FakeTcpInfo:
    """The ss sampler runs in a thread on the real clock: here one fixed row per flow it was
    asked for (tests/experiments/test_tcpinfo.py covers the sampler's parsing)."""

    def __init__(self, hosts, flows_by_host, t0, interval_s, stop):
        self.series = {p: [[1.0, 21.0 + p % 7, 10 + p % 5, 20.2]] for ports in flows_by_host.values()
                       for p in ports.values()}
        self.subflows = {}
        self.errors = []

    def run(self):
        pass


def traffic_outputs(tmp_dir: str, monkeypatch) -> dict:
    with_ping = traffic_run(os.path.join(tmp_dir, "ping"), monkeypatch, TRAFFIC_DOC)
    without = traffic_run(os.path.join(tmp_dir, "noping"), monkeypatch,
                          {k: v for k, v in TRAFFIC_DOC.items() if k != "ping"})
    return {"with_ping": with_ping, "without_ping": without}


def traffic_run(tmp_dir: str, monkeypatch, scenario_doc: dict) -> dict:
    os.makedirs(tmp_dir)
    clock, launches = FakeClock(), []
    fake_time = types.SimpleNamespace(monotonic=clock.monotonic, time=clock.time, sleep=clock.sleep)
    for module in (case, iperf, link, short):  # every module of the traffic phase that reads the clock
        monkeypatch.setattr(module, "time", fake_time)
    monkeypatch.setattr(case, "LinkControl", FakeControl)
    monkeypatch.setattr(case, "TcpInfoSampler", FakeTcpInfo)
    hosts = {n: FakeHost(n, clock, launches) for n in ("h1", "h2", "h3", "h4")}
    net = types.SimpleNamespace(get=hosts.__getitem__, hosts=list(hosts.values()))
    with open(os.path.join(tmp_dir, "link-l0.jsonl"), "w") as f:
        for i in range(3):
            f.write(json.dumps({"t": 7.6 + i / 10, "dir": "ab", "interval_s": 0.1, "qlen_pkts": i, "tx_bytes": 1000,
                                "sojourn_us": {"count": i, "mean": 1500.0}, "drops": {"overflow": i}}) + "\n")
            f.write(json.dumps({"t": 7.6 + i / 10, "dir": "ba", "interval_s": 0.1}) + "\n")
        f.write("not json\n")
    ticks = []
    progress = types.SimpleNamespace(tick=lambda t: ticks.append(round(t, 3)))
    scenario = parse_scenario(scenario_doc, "traffic.toml")
    out = case._traffic(scenario, net, {"l0": FakeLink("l0")}, tmp_dir, progress)
    assert isinstance(out.pop("cpu"), list)  # real /proc samples: not pinned
    return json.loads(json.dumps({"launches": launches, "ticks": ticks, "record": out}))


# --- the tests ---------------------------------------------------------------------------------------------

def _pinned(name: str):
    with open(os.path.join(PINNED, f"{name}.json")) as f:
        return json.load(f)


def _as_json(data) -> str:
    """As results.json and run.json would hold it: key order, tuples as lists, floats exactly."""
    return json.dumps(data, indent=1)


def test_scenario_parsing_and_its_refusals_are_unchanged():
    assert _as_json(scenario_outputs()) == _as_json(_pinned("scenarios"))


def test_run_metrics_summary_csv_and_report_are_unchanged(monkeypatch):
    assert _as_json(metrics_outputs(monkeypatch)) == _as_json(_pinned("metrics"))


def test_traffic_schedule_and_collected_record_are_unchanged(tmp_path, monkeypatch):
    assert _as_json(traffic_outputs(str(tmp_path), monkeypatch)) == _as_json(_pinned("traffic"))


def _write_pinned() -> None:
    mp = pytest.MonkeyPatch()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outputs = {"scenarios": scenario_outputs(), "metrics": metrics_outputs(mp),
                       "traffic": traffic_outputs(tmp, mp)}
    finally:
        mp.undo()
    for name, data in outputs.items():
        with open(os.path.join(PINNED, f"{name}.json"), "w") as f:
            f.write(_as_json(data) + "\n")
        print(f"wrote {name}.json", file=sys.stderr)


if __name__ == "__main__":
    _write_pinned()

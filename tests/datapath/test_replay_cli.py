"""ckcd-replay's command line: bad input names the parameter and exits 2;
--describe prints the full configuration; output is deterministic per seed."""

from __future__ import annotations

import json
import subprocess

import pytest

from replaylib import REPLAY, SEC, merge, poisson, run_raw


@pytest.mark.parametrize("spec,names", [
    ("nosuchqdisc", ["unknown discipline", "nosuchqdisc"]),
    ("droptail limt=80", ["unknown parameter", "limt"]),
    ("droptail limit=0", ["limit", "out of range"]),
    ("droptail limit=-5", ["limit", "out of range"]),
    ("droptail limit=99999999999", ["limit", "out of range"]),
    ("droptail limit=", ["limit", "empty"]),
    ("droptail limit=eighty", ["limit", "not a number"]),
    ("droptail limit", ["expected key=value"]),
    ("droptail limit=80 limit=90", ["limit", "twice"]),
    ("red min=60 max=20", ["'max'", "'min'"]),
    ("red max=100 limit=80", ["'max'", "'limit'"]),
    ("red max_p=1.5", ["max_p", "out of range"]),
    ("red wlog=40", ["wlog"]),
    ("codel target_ms=0", ["target_ms"]),
    ("codel interval_ms=0.0001", ["interval_ms", "decimal"]),
    ("hdcodel p=1.5", ["'p'", "out of range"]),
    ("hdcodel p=0.3333333", ["'p'", "decimal"]),
    ("hdcodel key=mac", ["'key'", "host|flow"]),
    ("hdcodel mode=adaptive", ["'mode'", "dynamic|static"]),
    ("hdcodel mode=static", ["'heavy_key'", "static"]),
    ("hdcodel heavy_key=5", ["'heavy_key'", "static only"]),
    ("hdcodel mode=static heavy_key=5 hist_len=64", ["'hist_len'", "dynamic only"]),
    ("hdcodel heavy_key=4294967296 mode=static", ["heavy_key", "out of range"]),
    ("hdcodel rec_int=0", ["rec_int", "out of range"]),
    ("hdcodel hist_len=65537", ["hist_len", "out of range"]),
    ("hdcodel stat_int=0", ["stat_int", "out of range"]),
    ("hdcodel thin=always", ["'thin'", "random|counter"]),
    ("hdcodel spare=never", ["'spare'", "advance|hold"]),
    ("hdcodel limit=0", ["limit", "out of range"]),
    ("hdcodel target_ms=0", ["target_ms"]),
    ("choke min=80 max=80", ["'max'"]),
    ("ckcd omega=0", ["omega"]),
    ("ckcd omega=2", ["omega"]),
    ("ckcd delta_ms=0", ["delta_ms"]),
    ("ckcd flows=1", ["flows"]),
    ("ckcd k=0", ["'k'"]),
    ("ckcd qmax=200", ["qmax", "limit"]),
    ("ckcd qmin=70 qmax=60", ["qmin"]),
    ("ckcd dth_min_ms=10 dth_max_ms=5", ["dth_min_ms"]),
    ("ckcd rate_bps=0", ["rate_bps"]),
    ("fq_codel flows=0", ["flows", "out of range"]),
    ("fq_codel flows=65537", ["flows", "out of range"]),
    ("fq_codel quantum=255", ["quantum", "out of range"]),
    ("fq_codel limit=0", ["limit", "out of range"]),
    ("fq_codel ce_threshold_ms=-1", ["ce_threshold_ms", "out of range"]),
    ("fq_codel memory_limit=1000", ["memory_limit", "out of range"]),
    ("fq_codel drop_batch=0", ["drop_batch", "out of range"]),
    ("fq_codel ecn=2", ["ecn", "out of range"]),
    ("fq_codel perturb=1", ["unknown parameter", "perturb"]),
    ("pie tupdate_ms=0.5", ["tupdate_ms", "out of range"]),
    ("pie target_ms=0", ["target_ms", "out of range"]),
    ("pie alpha=2.5", ["alpha", "out of range"]),
    ("pie beta=0.00001", ["beta", "decimal"]),
    ("pie limit=0", ["limit", "out of range"]),
    ("pie bytemode=2", ["bytemode", "out of range"]),
    ("pie dq_rate_estimator=2", ["dq_rate_estimator", "out of range"]),
    ("dualpi2 limit=0", ["limit", "out of range"]),
    ("dualpi2 coupling=256", ["coupling", "out of range"]),
    ("dualpi2 c_protection=101", ["c_protection", "out of range"]),
    ("dualpi2 ecn_mask=4", ["ecn_mask", "out of range"]),
    ("dualpi2 beta=0.00001", ["beta", "decimal"]),
    ("dualpi2 mtu=63", ["mtu", "out of range"]),
    ("dualpi2 memory_limit=4294967296", ["memory_limit", "out of range"]),
    ("dualpi2 drop_overload=2", ["drop_overload", "out of range"]),
    ("dualpi2 drop_early=2", ["drop_early", "out of range"]),
    ("dualpi2 step_thresh_pkts=3 step_thresh_ms=1", ["'step_thresh_pkts'", "'step_thresh_ms'"]),
    ("dualpi2 split_gso=1", ["unknown parameter", "split_gso"]),
    ("bands weights=1,0 | droptail | droptail", ["weights"]),
    ("bands weights=1,1,1 | droptail | droptail", ["weights"]),
    ("bands map=64:1 | droptail | droptail", ["map"]),
    ("bands map=46:2 | droptail | droptail", ["map", "band"]),
    ("bands default=3 | droptail | droptail", ["default"]),
    ("bands penalized=2 | droptail | droptail", ["penalized"]),
    ("bands | droptail limit=0 | droptail", ["band 0", "limit"]),
    ("bands", ["child"]),
    ("bands | bands | droptail", ["bands"]),
    ("droptail | droptail", ["bands"]),
    ("", ["empty"]),
])
def test_bad_spec_exits_2_naming_the_parameter(spec, names):
    for mode in (["--describe"], []):
        cp = run_raw([*mode, "--qdisc", spec], "0 1 1500\n")
        assert cp.returncode == 2, (spec, cp.stdout)
        for n in names:
            assert n in cp.stderr, (spec, cp.stderr)
        if mode:  # --describe: the typed refusal, one JSON line, the same message
            [line] = cp.stdout.splitlines()
            typed = json.loads(line)
            assert set(typed) == {"error", "code", "discipline", "param", "other", "band"}
            assert "ckcd-replay: " + typed["error"] == cp.stderr.strip()
        else:
            assert cp.stdout == ""


def refusal(spec):
    cp = run_raw(["--describe", "--qdisc", spec])
    assert cp.returncode == 2 and cp.stderr.startswith("ckcd-replay: "), cp
    [line] = cp.stdout.splitlines()
    typed = json.loads(line)
    assert typed["error"] == cp.stderr.strip().removeprefix("ckcd-replay: ")
    return {k: v for k, v in typed.items() if k != "error"}


@pytest.mark.parametrize("spec,typed", [
    # unknown parameter: the name as given (the table has no index for it)
    ("droptail limt=80", dict(code="unknown-parameter", discipline="droptail", param="limt", other=None, band=None)),
    ("nosuchqdisc", dict(code="unknown-discipline", discipline=None, param=None, other=None, band=None)),
    # range
    ("ckcd limit=0", dict(code="range", discipline="ckcd", param="limit", other=None, band=None)),
    ("red max_p=1.5", dict(code="range", discipline="red", param="max_p", other=None, band=None)),
    # a conflict names both parameters
    ("red min=60 max=20", dict(code="conflict", discipline="red", param="max", other="min", band=None)),
    ("ckcd dth_min_ms=10 dth_max_ms=5",
     dict(code="conflict", discipline="ckcd", param="dth_min_ms", other="dth_max_ms", band=None)),
    ("dualpi2 step_thresh_pkts=3 step_thresh_ms=1",
     dict(code="conflict", discipline="dualpi2", param="step_thresh_pkts", other="step_thresh_ms", band=None)),
    # in a band: the band's discipline and index
    ("bands | droptail limit=0 | droptail",
     dict(code="range", discipline="droptail", param="limit", other=None, band=0)),
    ("bands | droptail | red limit=20 foo=3",
     dict(code="unknown-parameter", discipline="red", param="foo", other=None, band=1)),
    ("bands | droptail | red min=60 max=20",
     dict(code="conflict", discipline="red", param="max", other="min", band=1)),
    # a text value the discipline refuses; bands' own parameter: no band
    ("bands weights=1,0 | droptail | droptail",
     dict(code="value", discipline="bands", param="weights", other=None, band=None)),
])
def test_describe_prints_the_typed_refusal_as_json(spec, typed):
    assert refusal(spec) == typed


@pytest.mark.parametrize("spec", ["droptail", "red", "codel", "choke", "ckcd", "hdcodel", "sred", "fred", "sfb", "care",
                                  "fq_codel", "pie", "fq_codel ce_threshold_ms=0.5 ecn=1 flows=65536",
                                  "pie alpha=0.0625 beta=2 dq_rate_estimator=1 bytemode=1",
                                  "dualpi2", "dualpi2 step_thresh_pkts=5 ecn_mask=3 drop_early=1 drop_overload=0 ecn=0",
                                  "hdcodel mode=static heavy_key=4294967295 key=flow thin=counter spare=hold p=0",
                                  "bands weights=1,3 map=46:1,10:1 default=0 penalized=1 | ckcd limit=80 | droptail limit=20"])
def test_describe_lists_every_parameter_and_round_trips(spec):
    cp = run_raw(["--describe", "--qdisc", spec])
    assert cp.returncode == 0, cp.stderr
    desc = cp.stdout.strip()
    assert desc.split()[0] == spec.split()[0]
    again = run_raw(["--describe", "--qdisc", desc])
    assert again.returncode == 0 and again.stdout.strip() == desc


@pytest.mark.parametrize("spec, limit", [("ckcd", 80), ("cocoa limit=80 flow_limit=40", 80), ("hdcodel", 1000),
                                         ("fq_codel", 10240), ("pie", 1000), ("dualpi2", 10000),
                                         ("bands | ckcd limit=40 | droptail limit=25 | red", 145)])
def test_limit_pkts_is_the_most_a_queue_holds(spec, limit):
    """aqm_limit_pkts, which sizes sch_ckcd's descriptor pool: a discipline's `limit` (not
    cocoa's per-flow flow_limit), for bands the sum of its bands' (red's default 80)."""
    [config] = [json.loads(l) for l in run_raw(["--qdisc", spec], "").stdout.splitlines()[:1]]
    assert config["limit_pkts"] == limit, config


def test_describe_fills_in_table_ii_defaults():
    d = run_raw(["--describe", "--qdisc", "ckcd"]).stdout.split()
    assert {"limit=80", "delta_ms=100", "d_ms=5", "omega=0.002"} <= set(d)
    assert "limit=80" in run_raw(["--describe", "--qdisc", "codel"]).stdout.split()
    assert {"target_ms=5", "interval_ms=100"} <= set(run_raw(["--describe", "--qdisc", "codel"]).stdout.split())
    # seed 003: Linux 3.17's CoDel (limit 1000, target 5 ms, interval 100 ms), p = 1/3, the
    # connection keyed by host pair, and the controller's estimator defaults
    assert {"limit=1000", "target_ms=5", "interval_ms=100", "p=0.333333", "key=host", "mode=dynamic",
            "rec_int=1", "hist_len=128", "stat_int=32", "thin=random", "spare=advance", "ecn=0"} == set(
        run_raw(["--describe", "--qdisc", "hdcodel"]).stdout.split()[1:])


@pytest.mark.parametrize("trace,what", [
    ("0 1\n", "expected"),
    ("0 1 0\n", "expected"),
    ("0 1 1500 64\n", "dscp"),
    ("0 1 1500 0 4294967296\n", "host_id"),
    ("0 1 1500 0 -1\n", "expected"),
    ("0 1 1500 0 1 4\n", "ecn"),
    ("100 1 1500\n50 1 1500\n", "backwards"),
    ("-5 1 1500\n", "expected"),
    ("x y z\n", "expected"),
])
def test_bad_trace_exits_2(trace, what):
    cp = run_raw(["--qdisc", "droptail"], trace)
    assert cp.returncode == 2 and what in cp.stderr


@pytest.mark.parametrize("opt", [["--rate-bps", "0"], ["--rate-bps", "-1"], ["--seed", "x"], ["--bogus"],
                                 ["--xstats-every-ms", "0"], ["--reconfigure", "nocolon"]])
def test_bad_options_exit_2(opt):
    cp = run_raw(["--qdisc", "droptail", *opt], "0 1 1500\n")
    assert cp.returncode == 2


def trace_text():
    tr = merge(poisson(1, 120e6, 0, SEC // 4, seed=1), poisson(2, 60e6, 0, SEC // 4, seed=1))
    return "".join(f"{t} {f} {ln}\n" for t, f, ln, _ in tr)


def test_deterministic_for_a_seed_and_seed_matters():
    text = trace_text()
    a = run_raw(["--qdisc", "choke", "--seed", "7"], text)
    b = run_raw(["--qdisc", "choke", "--seed", "7"], text)
    c = run_raw(["--qdisc", "choke", "--seed", "8"], text)
    assert a.returncode == 0 and a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_output_is_json_lines_with_one_line_per_packet():
    text = trace_text()
    n = len(text.splitlines())
    cp = run_raw(["--qdisc", "ckcd", "--rate-bps", "100000000"], "# comment\n\n" + text)
    objs = [json.loads(line) for line in cp.stdout.splitlines()]
    types = [o["type"] for o in objs]
    assert types[0] == "config" and types[-1] == "stats"
    pkts = [o for o in objs if o["type"] == "pkt"]
    assert sorted(p["seq"] for p in pkts) == list(range(n))
    for p in pkts:
        if p["verdict"] == "sent":
            assert p["reason"] is None and p["t_dep_ns"] > p["t_ns"] >= p["t_arr_ns"]
            assert p["sojourn_ns"] == p["t_ns"] - p["t_arr_ns"]
        else:
            assert p["reason"] in ("overflow", "early", "choke-match", "delay")
    flows = {o["flow"]: o for o in objs if o["type"] == "flow"}
    for f, o in flows.items():
        mine = [p for p in pkts if p["flow"] == f]
        assert o["sent_pkts"] == sum(p["verdict"] == "sent" for p in mine)
        assert sum(o["drops"].values()) == sum(p["verdict"] == "dropped" for p in mine)
    stats = objs[-1]["total"]
    assert stats["deq_pkts"] == sum(o["sent_pkts"] for o in flows.values())
    assert stats["enq_pkts"] - stats["deq_pkts"] == sum(
        v for k, v in stats["drops"].items() if k not in ("overflow", "early")) - sum(
        1 for p in pkts if p["reason"] == "choke-match" and p["sojourn_ns"] == 0)


def test_serialization_by_frame_length():
    # two packets arriving together on an idle 10 Mbit/s link: 1000 B takes 800 us
    cp = run_raw(["--qdisc", "droptail", "--rate-bps", "10000000"], "0 1 1000\n0 2 500\n")
    pk = [json.loads(x) for x in cp.stdout.splitlines() if '"pkt"' in x]
    assert [(p["t_ns"], p["t_dep_ns"]) for p in pk] == [(0, 800_000), (800_000, 1_200_000)]


@pytest.mark.slow  # a million-flow trace: 9 s of the inner loop's minute
def test_more_flows_than_the_old_table_held():
    # ckcd-replay's per-flow table was capped at 2^20 slots and probed forever once a trace
    # held more distinct flows; now it grows. 2^20 + 1000 flows, one packet each, 1 ns apart.
    n = (1 << 20) + 1000
    trace = "".join(f"{i} {i} 64\n" for i in range(n))
    cp = subprocess.run([REPLAY, "--qdisc", "droptail limit=1000000", "--no-packets"], input=trace,
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    flows = sum(1 for line in cp.stdout.splitlines() if line.startswith('{"type":"flow"'))
    assert flows == n
    total = json.loads(cp.stdout.splitlines()[-1])["total"]
    assert total["enq_pkts"] + total["drops"]["overflow"] == n


# --events: another host's record (datapath/kernel/ckcd_record.h) replayed.
RECORD = """r 7
e 100 1 1500 0 1
e 200 2 1500 0 2
r 9
d 300 0
x 1 overflow
d 400 -
# events 6 of 10
"""


def test_events_replays_arrivals_and_dequeues_at_their_recorded_times(tmp_path):
    """The record's arrivals and dequeue requests, at their times: droptail limit=1 sends
    the first packet when asked at 300 and drops the second on arrival, as the record says;
    the record's own verdicts (x, d's seq) are not read."""
    path = tmp_path / "record.txt"
    path.write_text(RECORD)
    cp = run_raw(["--qdisc", "droptail limit=1", "--events", str(path)])
    assert cp.returncode == 0, cp.stderr
    lines = [json.loads(l) for l in cp.stdout.splitlines()]
    pkts = {p["seq"]: (p["verdict"], p["reason"], p["t_ns"]) for p in lines if p["type"] == "pkt"}
    assert pkts == {0: ("sent", None, 300), 1: ("dropped", "overflow", 200)}
    [ev] = [l for l in lines if l["type"] == "events"]
    # an r line has no time: it may follow any event (the kernel draws inside enqueue)
    assert ev == {"type": "events", "ops": 4, "random_recorded": 2, "random_used": 0, "random_past_record": 0}


def test_events_takes_the_cores_random_numbers_from_the_record(tmp_path):
    """CHOKe draws a victim for every arrival once its average passes min: with no r lines
    each draw is counted past the record (the runs have parted); with enough, all come from
    it."""
    arrivals = "".join(f"e {100 * i} {i % 3} 1500 0 {i % 3}\n" for i in range(1, 40))
    spec = "choke limit=30 min=1 max=20 wlog=1"
    for randoms, past in (("", True), ("r 0\n" * 200, False)):
        path = tmp_path / "record.txt"
        path.write_text(randoms + arrivals)
        cp = run_raw(["--qdisc", spec, "--events", str(path), "--no-packets"])
        assert cp.returncode == 0, cp.stderr
        [ev] = [json.loads(l) for l in cp.stdout.splitlines() if '"events"' in l]
        if past:
            assert ev["random_past_record"] > 0 and ev["random_used"] == 0, ev
        else:
            assert ev["random_past_record"] == 0 and 0 < ev["random_used"] <= 200, ev


@pytest.mark.parametrize("record, args", [
    ("e 100 1 1500\n", []),                 # a field missing
    ("e 200 1 1500 0 1\nd 100 0\n", []),    # time going backwards
    ("r -1\n", []),
    ("q 1\n", []),                          # no such event
    ("e 100 1 1500 0 1\n", ["--reconfigure", "5:droptail"]),
])
def test_events_refuses_a_bad_record_or_option(tmp_path, record, args):
    path = tmp_path / "record.txt"
    path.write_text(record)
    cp = run_raw(["--qdisc", "droptail", "--events", str(path), *args])
    assert cp.returncode == 2 and cp.stdout == "", cp.stdout
    assert "record.txt:" in cp.stderr or "--events" in cp.stderr, cp.stderr

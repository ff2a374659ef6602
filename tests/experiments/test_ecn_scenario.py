"""ECN in the experiments, without a lab: the scenario key `ecn` of a [[flows]] entry, the
per-host rule it obeys, the kernel counters a run records per sender, and how marks reach the
metrics and the report."""

import os

import pytest

from experiments.analysis import metrics as analysis
from experiments.analysis.summary import summarize

from experiments.output import markdown
from experiments.lab.hosts import parse_netstat
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import parse_scenario

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "netstat", "loopback_transfer.txt")
BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["ckcd_ecn"],
        "variants": {"ckcd_ecn": {"discipline": "ckcd", "ecn": 1}},
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}}


def doc(*flows):
    return {**BASE, "flows": list(flows)}


def test_ecn_is_read_per_flow_group_and_defaults_to_off():
    sc = parse_scenario(doc({"src": "h1", "dst": "h3", "cc": "cubic", "ecn": True},
                            {"src": "h2", "dst": "h4", "cc": "bbr"}))
    assert [(f.label, f.ecn) for f in sc.flows] == [("cubic", True), ("bbr", False)]


@pytest.mark.parametrize("flows,key,words", [
    # ECN is net.ipv4.tcp_ecn, one value per network namespace (host): one sender cannot mix
    (({"src": "h1", "dst": "h3", "cc": "cubic", "ecn": True}, {"src": "h1", "dst": "h4", "cc": "bbr"}),
     "flows[1].ecn", "per-host setting"),
    (({"src": "h1", "dst": "h3", "cc": "cubic", "ecn": "yes"},), "flows[0].ecn", ""),
])
def test_ecn_refusals_name_the_key(flows, key, words):
    """Bad input: refused before anything runs, naming the key."""
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc(*flows), "t.toml")
    assert key in str(e.value) and words in str(e.value)


def test_netstat_counters_are_read_from_the_kernels_text():
    """Recorded /proc/net/netstat of a namespace after a loopback transfer with ECN on: the
    delivered segments are there, and CE-echoed ones (none on loopback) read as 0, not missing."""
    assert parse_netstat(open(FIXTURE).read()) == {"delivered": 5, "delivered_ce": 0}
    assert parse_netstat("Ip: Forwarding\nIp: 1\n") == {}


def _record(marks_rows, link_marks):
    """A minimal run record: one link whose 100 ms rows carry drops and marks."""
    rows = [{"t": 5.0 + i, "interval_s": 1.0, "qlen_pkts": 10, "tx_bytes": 6_250_000, "sojourn_ms": 1.0,
             "sojourn_count": 100, "drops": {"early": 1}, "marks": m} for i, m in enumerate(marks_rows)]
    flows = [{"label": "cubic", "cc": "cubic", "src": "h1", "dst": "h3", "ecn": True, "error": None,
              "goodput": [[t + 0.5, 40.0, 1.0] for t in range(10)], "srtt": [], "link_drops": {"l": {"early": 2}},
              "link_marks": {"l": link_marks}}]
    sc = parse_scenario(doc({"src": "h1", "dst": "h3", "cc": "cubic", "ecn": True}))
    return {"scenario": sc.to_dict(), "case": {"name": "ckcd_ecn", "discipline": "ckcd_ecn", "approach": "none"},
            "rep": 1, "error": None, "flows": flows, "ping": [], "cpu": [],
            "links": {"l": {"series": rows, "sojourn_samples": [], "final": None}},
            "tcp_counters": {"h1": {"delivered": 1000, "delivered_ce": 40}}}


def test_marks_reach_the_metrics_summary_and_report():
    """Rule: marks are counted by reason as drops are (window sums of the link's log), per flow
    from the link's flow stats, and per sender as the kernel's CE-echoed segments; the report's
    case table gains an 'ECN marks' column only when some case marked."""
    rec = _record([{"early": 3, "delay": 1}, {"early": 2, "delay": 0}], {"early": 5, "delay": 1})
    m = analysis.run_metrics(rec)
    w0, w1 = m["window_s"]
    in_window = [r for r in rec["links"]["l"]["series"] if w0 <= r["t"] <= w1]
    assert m["marks"] == {k: sum(r["marks"].get(k, 0) for r in in_window) for k in ("early", "delay")}
    assert m["flows"][0]["link_marks"] == 6 and m["flows"][0]["ecn"] is True
    assert m["senders"] == {"h1": {"delivered": 1000, "delivered_ce": 40, "ce_fraction": 0.04}}
    rec["metrics"] = m
    # the record has no final link stats, so it is untrusted: pooled here to see the marks' path
    [entry] = summarize([rec], include_untrusted=True)
    assert entry["marks_by_reason"]["early"]["mean"] == m["marks"]["early"]
    table = markdown.case_table([entry])
    assert "ECN marks" in table[0] and f"early {m['marks']['early']}" in table[2]
    quiet = _record([{}, {}], {})
    quiet["metrics"] = analysis.run_metrics(quiet)
    assert "ECN marks" not in markdown.case_table(summarize([quiet]))[0]

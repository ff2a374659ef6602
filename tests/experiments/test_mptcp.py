"""Multipath TCP flows without a lab: the scenario keys, each subflow's address, ss's subflow
lines grouped into their connection, and the metrics that answer "one fair share or n". The ss
text is recorded from a real MPTCP connection on this machine (two namespaces, a second address
with an endpoint of `subflow` kind, `mptcpize run iperf3`); the lab test is test_mptcp_lab.py."""

from __future__ import annotations

import subprocess
import threading

import pytest

from experiments.analysis.metrics import _flow_metrics, mptcp_metrics
from experiments.lab import mptcp
from experiments.run.probes.ss import TcpInfoSampler, parse_ss
from experiments.scenario.catalog import parse_scenario
from experiments.scenario.model import ScenarioError

# ss -tinH state established on the sender: the data connection's first subflow (--cport 40001),
# its joined subflow from 10.9.1.1 (printed scoped: %mpva), and iperf3's control connection's two.
# Both of a connection's subflows carry its peer's token after the "/": 8c21ad10 for the data.
MPTCP_SS = (
    "0      0       10.9.1.1%mpva:48559 10.9.0.3:5301\n"
    "\t bbr wscale:9,9 rto:204 rtt:0.016/0.009 mss:1448 cwnd:11 bytes_sent:144 bytes_acked:145 "
    "minrtt:0.007 tcp-ulp-mptcp flags:Jjec token:ac43de7(id:0)/2ba3c0e5(id:1) seq:a0712aa11d73f43 sfseq:2 "
    "ssnoff:99682e8d maplen:1\n"
    "0      1865440 10.9.1.1%mpva:56853 10.9.0.3:5301\n"
    "\t cubic wscale:9,9 rto:204 rtt:0.054/0.06 mss:1448 cwnd:137 ssthresh:130 bytes_acked:921759174 "
    "busy:556ms retrans:0/50 minrtt:0.004 tcp-ulp-mptcp flags:Jjec token:41034832(id:0)/8c21ad10(id:1) "
    "seq:24a0f7e0d20491e1 sfseq:0 ssnoff:91500079 maplen:0\n"
    "0      812840       10.9.0.1:40001 10.9.0.3:5301\n"
    "\t cubic wscale:9,9 rto:204 rtt:0.052/0.066 mss:1448 cwnd:124 ssthresh:121 bytes_acked:1513298777 "
    "busy:968ms retrans:0/10 minrtt:0.004 tcp-ulp-mptcp flags:Mmec token:0000(id:0)/8c21ad10(id:0) "
    "seq:24a0f7e0d20491e1 sfseq:1 ssnoff:f8a39f0a maplen:0\n"
    "0      0            10.9.0.1:49934 10.9.0.3:5301\n"
    "\t bbr wscale:9,9 rto:204 rtt:0.09/0.046 mss:1448 cwnd:12 bytes_acked:42 minrtt:0.015 "
    "tcp-ulp-mptcp flags:Mmec token:0000(id:0)/2ba3c0e5(id:0) seq:a0712aa11d73f41 sfseq:2 ssnoff:45697209 "
    "maplen:1\n")

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["droptail"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}}


def flows(*entries):
    return parse_scenario({**BASE, "flows": list(entries)}, "test.toml").flows


def test_ss_reads_each_subflows_connection_token_and_unscoped_address():
    """Rule: a subflow's connection is its peer's token, the same on all its subflows; a
    subflow from a host's second address is printed scoped (%dev) and read without it."""
    socks = parse_ss(MPTCP_SS)
    assert [(s.local, s.local_port, s.mptcp_token) for s in socks] == [
        ("10.9.1.1", 48559, "2ba3c0e5"), ("10.9.1.1", 56853, "8c21ad10"),
        ("10.9.0.1", 40001, "8c21ad10"), ("10.9.0.1", 49934, "2ba3c0e5")]
    assert parse_ss("0 0 10.0.0.1:1 10.0.0.3:2\n\t cubic rtt:1/1 cwnd:10\n")[0].mptcp_token is None


class _Host:
    """A Mininet host whose `ss` prints the recorded text."""

    def __init__(self, text):
        self.text = text

    def popen(self, cmd, **kwargs):
        assert cmd[0] == "ss"
        return subprocess.Popen(["printf", "%s", self.text], **kwargs)


def test_the_sampler_puts_a_joined_subflow_with_its_connection_not_with_the_control_connection():
    """Rule: the flow's own socket (its --cport) is its series; a subflow that joined its
    connection (same token) is its subflow series, by local address:port; the control
    connection's subflows, from the same addresses to the same server port, are neither."""
    sampler = TcpInfoSampler({"h1": _Host(MPTCP_SS)}, {"h1": {40001: 5301}}, 0.0, 1.0, threading.Event())
    sampler._sample("h1", {40001: 5301})
    assert len(sampler.series[5301]) == 1 and sampler.series[5301][0][4] == 1513298777
    assert list(sampler.subflows) == [5301]
    [(local, rows)] = sampler.subflows[5301].items()
    assert local == "10.9.1.1:56853" and rows[0][4] == 921759174


def test_mptcp_keys_are_read_and_checked():
    """Rule: mptcp gives 2 subflows unless said; subflows and subflow_aggregates only with
    mptcp; one aggregate per subflow, the first the flow's; a sender's MPTCP flows agree on
    subflows; BPF controls are refused (they are loaded per run, not per subflow)."""
    [f] = flows({"src": "h1", "dst": "h3", "cc": "cubic", "mptcp": True})
    assert (f.mptcp, f.subflows, f.subflow_aggregates, f.aggregate) == (True, 2, None, None)
    [g] = flows({"src": "h1", "dst": "h3", "cc": "cubic", "mptcp": True, "subflows": 3,
                 "subflow_aggregates": ["queue_filling", "low_delay", "low_delay"]})
    assert g.aggregate == "queue_filling" and g.subflows == 3
    bad = [({"subflows": 2}, "flows[0].subflows"),
           ({"mptcp": True, "subflows": 1}, "flows[0].subflows"),
           ({"mptcp": True, "subflows": mptcp.MAX_SUBFLOWS + 1}, "flows[0].subflows"),
           ({"mptcp": True, "subflow_aggregates": ["low_delay"]}, "flows[0].subflow_aggregates"),
           ({"mptcp": True, "aggregate": "low_delay", "subflow_aggregates": ["queue_filling", "low_delay"]},
            "flows[0].subflow_aggregates"),
           ({"mptcp": True, "cc": "bpf_vegas"}, "flows[0].cc")]
    for extra, key in bad:
        with pytest.raises(ScenarioError, match=key.replace("[", r"\[").replace("]", r"\]")):
            flows({"src": "h1", "dst": "h3", "cc": "cubic", **extra})
    with pytest.raises(ScenarioError, match="must agree on subflows"):
        flows({"src": "h1", "dst": "h3", "cc": "cubic", "mptcp": True},
              {"src": "h1", "dst": "h4", "cc": "cubic", "mptcp": True, "subflows": 3})


def test_each_extra_subflow_has_an_address_of_its_own_in_the_hosts_subnet():
    """Rule: the k-th extra address is the host's plus 64 k, inside a /24 for every lab host
    (their first addresses end below .64) and never another host's."""
    assert [mptcp.subflow_address("10.0.0.1", k) for k in (1, 2, 3)] == ["10.0.0.65", "10.0.0.129", "10.0.0.193"]
    firsts = {f"10.0.0.{n}" for n in range(1, 17)}
    extras = {mptcp.subflow_address(a, k) for a in firsts for k in range(1, mptcp.MAX_SUBFLOWS)}
    assert not extras & firsts and len(extras) == 16 * (mptcp.MAX_SUBFLOWS - 1)
    with pytest.raises(ValueError):
        mptcp.subflow_address("10.0.0.1", mptcp.MAX_SUBFLOWS)
    assert mptcp.extra_interfaces(flows({"src": "h1", "dst": "h3", "cc": "cubic", "mptcp": True, "subflows": 3},
                                        {"src": "h2", "dst": "h4", "cc": "cubic"})) == {"h1": 2}


def _acked(mbps_per_s: float, seconds: int = 10) -> list[list]:
    return [[float(t), 20.0, 10, 20.0, int(t * mbps_per_s * 1e6 / 8), 0, 0] for t in range(seconds + 1)]


def test_a_connections_goodput_is_its_subflows_and_its_fair_shares_are_over_single_path_flows():
    """Rule: an MPTCP flow's goodput is the sum of its subflows' (each from its bytes
    acknowledged); its fair shares are that over the mean single-path flow's goodput, so two
    subflows each at one flow's rate read 2."""
    first = {"label": "mp", "cc": "cubic", "goodput": [], "srtt": [], "error": None,
             "key": "tcp 10.0.0.1:25201>10.0.0.3:5201", "tcp_info": _acked(16),
             "subflows": [{"key": "tcp 10.0.0.65:4000>10.0.0.3:5201", "tcp_info": _acked(16),
                           "link_drops": {"l0": {"overflow": 3}}, "link_marks": {}}]}
    single = {"label": "tcp", "cc": "cubic", "goodput": [], "srtt": [], "error": None, "tcp_info": _acked(16)}
    m = {"flows": [_flow_metrics(f, 2.0, 8.0, 20.0) for f in (first, single)]}
    m["mptcp"] = mptcp_metrics(m["flows"])
    mp = m["mptcp"]["mp"]
    assert mp["mean_mbps"] == pytest.approx(32.0, rel=1e-6)
    assert mp["subflow_mbps"] == pytest.approx([16.0, 16.0], rel=1e-6)
    assert mp["fair_shares"] == pytest.approx(2.0, rel=1e-6) and mp["subflows_active"] == 2
    assert m["flows"][0]["subflows"][1]["link_drops"] == 3
    assert "tcp" not in m["mptcp"]
    # with no single-path flow there is nothing to be a share of
    assert mptcp_metrics([m["flows"][0]])["mp"]["fair_shares"] is None

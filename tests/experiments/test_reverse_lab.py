"""Both directions loaded in the real lab (private OVS, ryu-manager, Mininet, ckcd-link,
iperf3), with a ping per RTT group: the reverse flow crosses the link's reverse direction, which
runs the case's discipline, and each RTT group's ping measures its own base RTT."""

import pytest

from experiments.run.orchestrate import run_batch
from experiments.scenario.catalog import parse_scenario

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link

# Two forward flows of 10 and 30 ms base RTT (h2's 20 ms access delay), one reverse flow (h3 to
# h1), and a ping per RTT group: h1>h3 (the main one, 10 ms) and h2>h4 (30 ms).
SCENARIO = {"name": "reverse_lab", "topology": "dumbbell", "duration_s": 12, "warmup_s": 3,
            "disciplines": ["ckcd"], "link": {"rate_mbps": 20, "delay_ms": 5, "buffer_pkts": 50},
            "access_delay_ms": {"h2": 20},
            "flows": [{"label": "up1", "src": "h1", "dst": "h3", "cc": "cubic"},
                      {"label": "up2", "src": "h2", "dst": "h4", "cc": "cubic"},
                      {"label": "down", "src": "h3", "dst": "h1", "cc": "cubic"}],
            "ping": {"src": "h1", "dst": "h3", "interval_s": 0.2, "per_rtt_group": True}}


@pytest.fixture(scope="module")
def record(private_ovs, tmp_path_factory):
    [rec] = run_batch([parse_scenario(SCENARIO, "test")], str(tmp_path_factory.mktemp("reverse")))
    assert rec["error"] is None, rec["error"]
    return rec


def test_a_reverse_flow_crosses_the_reverse_direction_under_the_cases_discipline(record):
    """Rule: the reverse flow's data is in ckcd-link's B->A direction, which runs the case's
    discipline (not the default droptail), and its fairness and utilization are its own.
    Tolerance: the reverse flow alone in its direction takes over half of its 20 Mbit/s (CUBIC
    alone through 50 packets, about 1.4 BDP, fills it but for its loss recoveries)."""
    final = record["links"]["l0"]["final"]["dirs"]
    assert final["ba"]["qdisc"].startswith("ckcd ") and record["qdisc_reverse"].startswith("ckcd ")
    [down] = [f for f in record["flows"] if f["label"] == "down"]
    assert down["reverse"] and down["key"].startswith("tcp 10.0.0.3:")
    carried = {d: sum(f["tx_pkts"] for f in final[d]["flows"] if f["key"] == down["key"]) for d in ("ab", "ba")}
    assert carried["ba"] > 1000 and carried["ab"] == 0, carried
    m = record["metrics"]
    assert m["reverse"]["flows"] == 1 and m["reverse"]["utilization"] > 0.5, m["reverse"]
    assert [f["label"] for f in m["flows"] if f["reverse"]] == ["down"]
    assert m["total_mbps"] == pytest.approx(sum(f["mean_mbps"] for f in m["flows"] if not f["reverse"]))


def test_each_rtt_group_has_its_own_ping_that_sees_its_base_rtt(record):
    """Rule: with per_rtt_group the 30 ms group (h2's 20 ms of access delay) gets its ping,
    h2>h4, beside the main ping's 10 ms group; each group's ping RTT is at least its base RTT,
    and the group ping's RTT check finds nothing outside the link. Tolerance: its mean is under
    the base RTT plus 30 ms (the 50-packet queue's 30 ms at 20 Mbit/s)."""
    [group] = record["metrics"]["group_pings"]
    assert (group["src"], group["dst"], group["base_rtt_ms"]) == ("h2", "h4", 30.0)
    assert 30.0 <= group["rtt_ms"]["mean"] <= 60.0, group["rtt_ms"]
    rtts = record["metrics"]["rtts"]
    assert rtts["30 ms RTT"]["ping_rtt_ms"] == group["rtt_ms"]["mean"]
    assert 10.0 <= rtts["10 ms RTT"]["ping_rtt_ms"] <= 40.0
    assert not [r for r in record["metrics"]["fidelity"]["reasons"] if r.startswith("ping h2")]

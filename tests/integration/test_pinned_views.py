"""Characterization: what GET /state and GET /metrics say about one fixed lab, compared in
full with the recording in tests/integration/pinned/views.json. It holds the controller's
read side still while its parts are reshaped; a change that means to alter either answer
records it again on purpose (CKCD_COEX_RECORD_PINNED=1 with this test) and the diff shows it.

The lab: the real controller and the Mininet dumbbell whose s1:3 - s2:3 link is ckcd-link,
every host having pinged every other; then a policy that touches each part of the read side:
a rule and an aggregate of our own, Separate Queues on, s1:3 a bottleneck with CKCD (so the
link runs bands of CKCD), s2:3 declared without a discipline, heavy-hitter detection on (its
sFlow agent on s1).

What is compared: /state whole (switches, meters, trees, links, hosts, each port's record)
but for the values of a ckcd-link port's live `link` counters, compared by their keys;
/metrics as the set of its coex_* samples (name and labels) and the values of those that the
lab fixes (counts of switches, links, hosts and path flows, the policy version, the link's
rate and delay, the discipline info). Byte, packet, drop, mark, queue and delay values move
with LLDP's timing and are left out; the process_* samples belong to prometheus_client.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.labkit import SFLOW_PORT, dumbbell_through_link
from tests.waiting import eventually

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link

OF_PORT, REST_PORT = 16723, 18127
LINK_BPS = 40_000_000
PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pinned", "views.json")
# Samples whose values the lab fixes; every other coex_* sample is compared by name and labels.
FIXED_VALUES = ("coex_switches_connected", "coex_links", "coex_hosts", "coex_policy_version",
                "coex_port_discipline_info", "coex_port_link_rate_bits_per_second",
                "coex_port_link_delay_seconds", "coex_aggregate_path_flows", "coex_heavy_hitters",
                "coex_heavy_hitter_steered_total", "coex_leader", "coex_switches_master")


def metrics_view(text: str) -> list:
    """The coex_* samples as sorted [name, {labels}, value or None]."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("coex_"):
                out.append([s.name, dict(sorted(s.labels.items())),
                            s.value if s.name in FIXED_VALUES else None])
    return sorted(out, key=lambda r: (r[0], sorted(r[1].items())))


def state_view(state: dict) -> dict:
    """/state with each port's live ckcd-link counters (`link`) as their keys, values None."""
    def keys_only(v):
        return {k: keys_only(x) for k, x in v.items()} if isinstance(v, dict) else None
    return {**state, "ports": [{**p, "link": keys_only(p["link"])} if "link" in p else p for p in state["ports"]]}


def test_state_and_metrics_answer_as_recorded(private_ovs, tmp_path):
    with dumbbell_through_link(tmp_path, OF_PORT, REST_PORT, LINK_BPS, "p0") as (_net, api, _link, _pid):
        api.ok("PUT", "/aggregates/bulk2", {"queue_weight": 2, "dscp": 12})
        api.ok("PUT", "/rules/bulk", {"aggregate": "bulk2", "match": {"ip_proto": 6, "tp_dst": 5302}})
        api.ok("PUT", "/ports/1/3", {"capacity_bps": LINK_BPS})
        api.ok("PUT", "/ports/1/3/aqm", {"discipline": "ckcd", "params": {"limit": 80}})
        api.ok("PUT", "/ports/2/3", {"capacity_bps": LINK_BPS})
        api.ok("PUT", "/approaches", {"separate_queues": True})
        api.ok("PUT", "/heavy-hitters/config", {"enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}",
                                                "sampling": 64, "polling_s": 5, "capacity_share": 0.3})
        state = eventually(lambda: (s := api.ok("GET", "/state"))
                           and all(p["status"] == "applied" for p in s["ports"]) and s,
                           what="both declared ports applied")
        with urllib.request.urlopen(api.base_url.removesuffix("/coex/v1") + "/metrics", timeout=10) as res:
            text = res.read().decode()
    got = {"state": state_view(state), "metrics": metrics_view(text)}
    if os.environ.get("CKCD_COEX_RECORD_PINNED") == "1":
        os.makedirs(os.path.dirname(PINNED), exist_ok=True)
        with open(PINNED, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
    with open(PINNED) as f:
        pinned = json.load(f)
    assert got["state"] == pinned["state"], json.dumps(got["state"], indent=1, sort_keys=True)
    assert got["metrics"] == pinned["metrics"], json.dumps(got["metrics"], indent=1)

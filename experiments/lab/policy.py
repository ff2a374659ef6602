"""A case's CoEx policy, put to the controller through its REST API."""

from __future__ import annotations

import time

from experiments.lab import mptcp
from experiments.lab.rest_client import CoexClient
from experiments.scenario.model import Case, Scenario


def apply_policy(api: CoexClient, scenario: Scenario, case: Case, net, link_ends) -> dict | None:
    """The CoEx policy of a case through the controller's REST API. Scenarios with aggregates get
    the same rules and bottleneck ports in every case; only the approach differs."""
    if not any(f.aggregate for f in scenario.flows):
        return None
    for f in scenario.flows:
        if f.aggregate:
            api.ok("POST", "/rules", {"name": f"flow-{f.port}", "aggregate": f.aggregate,
                                      "match": {"ip_proto": 6, "tp_dst": f.port}})
        for k, aggregate in enumerate((f.subflow_aggregates or [])[1:], start=1):
            # an MPTCP subflow is told from the connection's first by the address it leaves from
            api.ok("POST", "/rules", {"name": f"flow-{f.port}-subflow-{k}", "aggregate": aggregate, "priority": 1,
                                      "match": {"ip_proto": 6, "tp_dst": f.port,
                                                "ipv4_src": mptcp.subflow_address(net.get(f.src).IP(), k)}})
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

"""CKCD's own state over a run, read from ckcd-link's 100 ms log (docs/ckcd-link.md): the
number of active flows I, the fair share mu_f = C / I, and per flow its rate mu_i, its delay
threshold d_th and whether it is in the dropping state (seed 000, Algorithm 1). The log gives
them in its `xstats` keyed by flow hash and the 5-tuple of each hash in `flows`; a flow's
5-tuple is learned from the first line it sent in and kept, since CKCD keeps a flow for a
window after its last packet."""

from __future__ import annotations

import re

_ACTIVE = re.compile(r"\bactive_flows=(\d+) fair_share_bps=(\d+)")
_FLOW = re.compile(r"\bflow\.(\d+)=mu_bps:(\d+),dth_us:(\d+),dropping:([01])")


class CkcdStateReader:
    """Feed it the log's lines of one direction in order; each CKCD line becomes a point."""

    def __init__(self):
        self.keys: dict[int, str] = {}  # flow hash -> "tcp 10.0.0.1:40000>10.0.0.3:5201"
        self.points: list[dict] = []

    def add(self, t_s: float, row: dict) -> None:
        for f in row.get("flows", ()):
            if "key" in f:
                self.keys.setdefault(int(f["flow"], 16), f["key"])
        xstats = row.get("xstats", "")
        active = _ACTIVE.search(xstats)
        if not active:
            return  # not CKCD (or an older daemon without xstats in its log)
        flows = {}
        for h, mu, dth, dropping in _FLOW.findall(xstats):
            key = self.keys.get(int(h))
            if key is not None:
                flows[key] = [round(int(mu) / 1e6, 3), round(int(dth) / 1000, 3), int(dropping)]
        self.points.append({"t": t_s, "active": int(active.group(1)),
                            "fair_mbps": round(int(active.group(2)) / 1e6, 3), "flows": flows})

"""Flow counters read from the switches on demand (a /metrics scrape, heavy-hitter
confirmation): a flow-stats request to each switch asked, and the replies gathered by xid
until each switch's last part came or the deadline passed. A switch that does not answer in
time is left out: a scrape must not hang on one."""

from __future__ import annotations

import time

from ryu_app import flows
from ryu_app.framework import hub

FLOW_STATS_TIMEOUT_S = 1.0  # a scrape waits this long for the switches' flow counters


class FlowCounters:
    def __init__(self, datapaths):
        self.datapaths = datapaths
        self._waiting: dict[int, tuple] = {}  # xid -> (hub.Event, entries, xid)

    def read(self, timeout_s: float = FLOW_STATS_TIMEOUT_S, request=flows.path_flow_stats_request,
             dpids=None) -> dict[int, list]:
        """The counters of our table-1 forwarding flows (or what `request` asks for) on every
        connected switch (of `dpids`), asked now: dpid -> OFPFlowStats entries."""
        waiting = {}
        for dpid, dp in list(self.datapaths.items()):
            if dpids is not None and dpid not in dpids:
                continue
            req = request(dp)
            dp.set_xid(req)
            waiting[dpid] = self._waiting[req.xid] = (hub.Event(), [], req.xid)
            dp.send_msg(req)
        deadline = time.monotonic() + timeout_s
        answered = {}
        try:
            for dpid, (done, entries, _) in waiting.items():
                if done.wait(max(0.0, deadline - time.monotonic())):
                    answered[dpid] = entries
        finally:
            for _, _, xid in waiting.values():
                self._waiting.pop(xid, None)
        return answered

    def on_reply(self, msg) -> None:
        """One part of a flow-stats reply; the last part (no REPLY_MORE) completes its request."""
        wait = self._waiting.get(msg.xid)
        if wait is None:
            return
        wait[1].extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            wait[0].set()

"""Flow counters read from the switches on demand (a /metrics scrape, heavy-hitter
confirmation): a flow-stats request to each switch asked, and the replies gathered
(ryu_app.multipart) until each switch's last part came or the deadline passed. A switch that
does not answer in time is left out: a scrape must not hang on one."""

from __future__ import annotations

from ryu_app import flows
from ryu_app.multipart import MultipartReads

FLOW_STATS_TIMEOUT_S = 1.0  # a scrape waits this long for the switches' flow counters


class FlowCounters:
    def __init__(self, datapaths, reads: MultipartReads):
        self.datapaths, self.reads = datapaths, reads

    def read(self, timeout_s: float = FLOW_STATS_TIMEOUT_S, request=flows.path_flow_stats_request,
             dpids=None) -> dict[int, list]:
        """The counters of our table-1 forwarding flows (or what `request` asks for) on every
        connected switch (of `dpids`), asked now: dpid -> OFPFlowStats entries."""
        asked = [(dpid, self.reads.send(dp, request(dp))) for dpid, dp in list(self.datapaths.items())
                 if dpids is None or dpid in dpids]
        got = self.reads.gather([r for _, r in asked], timeout_s)
        return {dpid: entries for (dpid, _), entries in zip(asked, got) if entries is not None}

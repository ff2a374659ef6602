"""Multipart reads: a request sent to a switch, its reply parts gathered until the last one
(no OFPMPF_REPLY_MORE), waited for up to a deadline.

Every switch numbers its own transaction ids, so two switches may hand out the same xid at the
same moment: a read in flight is known by (dpid, xid), never by xid alone, or one switch's
reply would fill another switch's read.

The waiting happens outside Ryu's event loop (the replies come through that loop): in REST
handlers, in a /metrics scrape and in the green thread a connecting switch's reconcile runs in.
"""

from __future__ import annotations

import time

from ryu_app.framework import hub


class Read:
    """One request in flight: its reply's entries, complete once `done` is set."""

    def __init__(self, dpid: int, xid: int):
        self.dpid, self.xid, self.done, self.entries = dpid, xid, hub.Event(), []


class MultipartReads:
    def __init__(self):
        self._in_flight: dict[tuple[int, int], Read] = {}

    def send(self, dp, request) -> Read:
        dp.set_xid(request)
        read = self._in_flight[(dp.id, request.xid)] = Read(dp.id, request.xid)
        dp.send_msg(request)
        return read

    def gather(self, reads: list[Read], timeout_s: float) -> list[list | None]:
        """Each read's entries, in order; None for one not complete within timeout_s (of all
        of them together). The reads are forgotten either way: a late part is dropped."""
        deadline = time.monotonic() + timeout_s
        try:
            return [r.entries if r.done.wait(max(0.0, deadline - time.monotonic())) else None
                    for r in reads]
        finally:
            for r in reads:
                self._in_flight.pop((r.dpid, r.xid), None)

    def on_reply(self, dpid: int, msg) -> bool:
        """One part of a multipart reply; False if it answers none of our reads."""
        read = self._in_flight.get((dpid, msg.xid))
        if read is None:
            return False
        read.entries.extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            read.done.set()
        return True

    def forget(self, dpid: int) -> None:
        """A switch that went away: its reads will not be answered."""
        for key in [k for k in self._in_flight if k[0] == dpid]:
            del self._in_flight[key]

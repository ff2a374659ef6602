"""The live counters of the ckcd-link directions that serve switch ports, read when asked.

Which link serves which interface is in its Interface row's external_ids (ovs_config.aqm.
link_ports, one ovs-vsctl call for all of them); a direction's counters are the daemon's
`stats` of that direction (docs/ckcd-link.md). GET /metrics reads them at each scrape, GET
/state for each ckcd-link port it shows: both through one LinkStatsReader, so the two answers
read the same thing the same way. ckcd-link runs beside the controller (ovs_config.aqm:
local switches only), so this reads this machine's OVSDB and sockets.

A daemon that went away (between the OVSDB read and the request, or a link being torn down)
is no error here: its direction reads as None and the reader's callers leave it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from ovs_config import aqm
from ovs_config.link_daemon import LinkControl, LinkDaemonError

# ckcd-link's reasons (datapath/link/report.c), the keys of its `drops` and of its `marks`: an
# ECN-capable packet a discipline given ecn=1 would drop is marked CE instead, counted by the
# same reason.
DROP_REASONS = ("overflow", "early", "choke_match", "delay", "penalty", "flush", "shrink")


@dataclasses.dataclass(frozen=True)
class LinkDirection:
    """The ckcd-link serving an interface (its control socket) and the direction ("ab" or
    "ba") that leaves the switch through that interface."""
    control_path: str
    direction: str


def _by_reason(counts: object) -> dict[str, int]:
    """Every reason of DROP_REASONS, also at 0, and any other the daemon gave, sorted."""
    counts = counts if isinstance(counts, Mapping) else {}
    return {reason: counts.get(reason, 0) for reason in sorted(set(DROP_REASONS) | set(counts))}


@dataclasses.dataclass(frozen=True)
class DirectionStats:
    """One direction's `stats` as ckcd-link answered it.

    qlen_pkts, drops and marks are typed here (drops and marks: every reason, also at 0; a
    ckcd-link from before ECN has no `marks` and marked nothing); `reply` is the direction's
    whole object (rate, delay, bytes, sojourn, discipline and its state), for the readers of
    the other fields (GET /metrics)."""
    qlen_pkts: int
    drops: Mapping[str, int]
    marks: Mapping[str, int]
    reply: Mapping[str, object]

    @classmethod
    def from_reply(cls, d: Mapping[str, object]) -> DirectionStats:
        return cls(qlen_pkts=int(d.get("qlen_pkts") or 0), drops=_by_reason(d.get("drops")),
                   marks=_by_reason(d.get("marks")), reply=d)


class LinkStatsReader:
    """Reads which ckcd-link serves which interface, and one direction's counters.

    link_ports: interface name -> (control socket, direction), as ovs_config.aqm.link_ports
    reads them from the local OVSDB; link_control: a control socket's client (LinkControl).
    Unit tests give stand-ins for both."""

    def __init__(self, link_ports: Callable[[], Mapping[str, tuple[str, str]]] = aqm.link_ports,
                 link_control: Callable[[str], LinkControl] = LinkControl):
        self._link_ports, self._link_control = link_ports, link_control

    def served(self) -> dict[str, LinkDirection]:
        """Every interface a ckcd-link serves now ({} when the local OVSDB does not answer)."""
        try:
            ports = self._link_ports()
        except (OSError, ValueError):
            return {}
        return {name: LinkDirection(*where) for name, where in ports.items()}

    def read(self, where: LinkDirection) -> DirectionStats | None:
        """The direction's counters now, or None when its daemon does not answer."""
        try:
            d = self._link_control(where.control_path).stats(where.direction, max_flows=0)["dirs"][where.direction]
            return DirectionStats.from_reply(d) if isinstance(d, Mapping) else None
        except (LinkDaemonError, OSError, KeyError, TypeError, ValueError):
            return None  # the daemon went away between the OVSDB read and now

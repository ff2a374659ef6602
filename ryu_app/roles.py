"""This instance's OpenFlow role on each switch (OpenFlow 1.3, section 6.3.5).

A switch takes a new connection as EQUAL: full access, like any other. So every instance
asks for its role as soon as a switch connects, and writes nothing before the switch
confirms MASTER: the leader asks MASTER with its term's generation id, the others SLAVE
with the newest id the store knows (a switch refuses a MASTER or SLAVE request whose id is
behind the last it saw: OFPRRFC_STALE). Granting MASTER to one connection makes the switch
demote any other master to SLAVE, so a bridge never has two.

A SLAVE gets no packet-ins by default; it asks for them (SET_ASYNC) and for port status, so
a standby learns hosts and links as the leader does (from the LLDP the leader sends, too)
and can take over warm. It answers none of them.
"""

from __future__ import annotations

from coex.store import Term

MASTER, SLAVE = "master", "slave"


class Roles:
    def __init__(self, logger):
        self.logger = logger
        self.term: Term | None = None                       # ours while we lead
        self.confirmed: dict[int, str] = {}                 # dpid -> role the switch confirmed
        self._asked: dict[tuple[int, int], str] = {}        # (dpid, xid) -> role asked

    @property
    def leading(self) -> bool:
        return self.term is not None

    def may_write(self, dpid: int) -> bool:
        """Whether we may change switch dpid: we lead and it confirmed us as MASTER."""
        return self.term is not None and self.confirmed.get(dpid) == MASTER

    def ask(self, dp, newest_generation_id: int) -> None:
        """Ask switch dp for the role our state gives: MASTER with our term's id while we lead,
        else SLAVE with newest_generation_id (and the packet-ins and port status a standby
        keeps its map with). Until its answer we may not write to it."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        role = MASTER if self.leading else SLAVE
        self.confirmed.pop(dp.id, None)
        if role == SLAVE:
            packet_ins = 1 << ofp.OFPR_NO_MATCH | 1 << ofp.OFPR_ACTION
            port_status = 1 << ofp.OFPPR_ADD | 1 << ofp.OFPPR_DELETE | 1 << ofp.OFPPR_MODIFY
            removed = 1 << ofp.OFPRR_IDLE_TIMEOUT | 1 << ofp.OFPRR_HARD_TIMEOUT | 1 << ofp.OFPRR_DELETE
            # [as master or equal, as slave]: a master's defaults, and the slave's as above
            dp.send_msg(parser.OFPSetAsync(dp, [packet_ins, packet_ins], [port_status, port_status],
                                           [removed, 0]))
        gen = self.term.generation_id if role == MASTER else newest_generation_id
        req = parser.OFPRoleRequest(dp, ofp.OFPCR_ROLE_MASTER if role == MASTER else ofp.OFPCR_ROLE_SLAVE, gen)
        dp.set_xid(req)
        self._asked[(dp.id, req.xid)] = role
        dp.send_msg(req)

    def on_reply(self, dpid: int, msg) -> str | None:
        """A ROLE_REPLY: the role now confirmed on dpid, or None if it answers no request
        of ours or our state changed since we asked (a newer request is on its way)."""
        asked = self._asked.pop((dpid, msg.xid), None)
        ofp = msg.datapath.ofproto
        got = {ofp.OFPCR_ROLE_MASTER: MASTER, ofp.OFPCR_ROLE_SLAVE: SLAVE}.get(msg.role)
        if asked is None or got != asked or asked != (MASTER if self.leading else SLAVE):
            return None
        self.confirmed[dpid] = got
        self.logger.info("switch %016x: %s (generation id %d)", dpid, got, msg.generation_id)
        return got

    def on_error(self, dpid: int, msg) -> str | None:
        """An OFPT_ERROR: the role asked if it refuses one of our role requests, else None."""
        asked = self._asked.pop((dpid, msg.xid), None)
        if asked is not None:
            self.logger.warning("switch %016x refused %s: role request error code %d%s", dpid, asked, msg.code,
                                " (stale generation id)" if msg.code == msg.datapath.ofproto.OFPRRFC_STALE else "")
        return asked

    def forget(self, dpid: int) -> None:
        self.confirmed.pop(dpid, None)
        for key in [k for k in self._asked if k[0] == dpid]:
            del self._asked[key]

"""The trees the controller keeps installed: per (aggregate, destination host), the out port
on every switch joined to the host, along the aggregate's tree toward it.

coex.forwarding plans each tree; this keeps them: it sends a switch the hop flows that
changed (through ryu_app.switch_sync), replans the trees a lost link or a new policy
touches, forgets those toward hosts that left, and adopts what switches still hold after a
restart. The dict `trees` is read by the view (ryu_app/view.py) and by what each switch
should hold (coex.switch_state.desired); it is changed here only, in place.
"""

from __future__ import annotations

from coex import switch_state
from coex.forwarding import DEFAULT, Tree
from coex.topology import HostLocation, NoPath


class Trees:
    def __init__(self, *, net, datapaths, sync, in_force, switch_hosts, logger):
        self.net, self.datapaths, self.sync = net, datapaths, sync
        self.in_force, self.switch_hosts, self.logger = in_force, switch_hosts, logger
        self.trees: dict[tuple[str, str], Tree] = {}  # (aggregate, dst ip) -> dpid -> out port, installed

    def install(self, agg: str, dst: HostLocation, resend_to: int | None = None) -> Tree:
        """Bring every switch's flow for (agg, dst) to the tree the plan gives now: send the
        flows that changed (and the one of `resend_to`), delete them on switches the tree
        left. The tree comes nearest the destination first, so a packet never outruns its
        flow. Raises NoPath."""
        key = (agg, dst.ipv4)
        tree = self.in_force.plan.tree(self.net, agg, dst)
        old = self.trees.get(key, {})
        for dpid, out_port in tree.items():
            if old.get(dpid) != out_port or dpid == resend_to:
                self._change_hop(agg, dst.ipv4, dpid, out_port, add=True)
        for dpid in old.keys() - tree.keys():
            self._change_hop(agg, dst.ipv4, dpid, old[dpid], add=False)
        self.trees[key] = tree
        if old != tree:
            self.logger.info("tree %s -> %s (%016x:%d): %d switches%s", agg, dst.ipv4, dst.dpid, dst.port,
                             len(tree), ", replanned" if old else "")
        return tree

    def host_learned(self, host: HostLocation) -> None:
        """A host new or moved gets the default tree toward it at once (and its other trees
        moved), so the first IPv4 packet to it, from anywhere, finds its flow: with
        forwarding keyed on the destination, a new host costs its ARP and no packet-in per
        peer."""
        for agg in [DEFAULT] + [a for a, d in self.trees if d == host.ipv4 and a != DEFAULT]:
            try:
                self.install(agg, host)
            except NoPath:
                pass  # its switch has no links yet: packet-ins install the tree later

    def replan(self) -> None:
        """Every tree as the plan now in force gives it, nothing sent (each switch is brought
        to what it should hold afterwards). A tree of an aggregate the plan no longer has, or
        with no path left, goes; one adopted toward a host not learned yet stays."""
        old = dict(self.trees)
        self.trees.clear()
        for agg, dst_ip in old:
            dst = self.net.host_by_ip(dst_ip)
            if not self.in_force.plan.knows(agg):
                continue
            if dst is None:  # adopted from the switches after a restart: kept until the host shows
                self.trees[(agg, dst_ip)] = old[(agg, dst_ip)]
                continue
            try:
                self.trees[(agg, dst_ip)] = self.in_force.plan.tree(self.net, agg, dst)
            except NoPath:
                pass

    def adopt(self, dpid: int, held: switch_state.SwitchState) -> None:
        """A restarted controller knows no trees while the switches still forward along them:
        each hop flow a switch holds toward a destination we have no tree for becomes part of
        that tree (coex.switch_state.hop_of), so the reconcile keeps it and established pairs
        are not touched. A host learned again gets its planned tree, which replaces what was
        adopted; an aggregate the policy no longer has is not adopted (its flows go)."""
        plan = self.in_force.plan
        for flow in held.flows:
            hop = switch_state.hop_of(flow)
            if hop is None or hop.agg_id not in (0, *plan.agg_ids.values()):
                continue
            tree = self.trees.setdefault((plan.aggregate_of(hop.agg_id), hop.dst_ip), {})
            tree.setdefault(dpid, hop.out_port)

    def reroute_after_link_loss(self, gone_links) -> None:
        """Replan every tree that sent packets into a link that went; a switch cut off from
        the destination loses its flow (its packets come to us, and find no path)."""
        gone_ports = {end for link in gone_links for end in link}
        for key in [k for k, tree in self.trees.items() if any(hop in gone_ports for hop in tree.items())]:
            dst = self.net.host_by_ip(key[1])
            try:
                if dst is None:
                    raise NoPath(f"host {key[1]} is not known any more")
                self.install(key[0], dst)
            except NoPath:
                self.logger.warning("no path left toward %s for %s", key[1], key[0])
                self._drop(key)

    def forget_lost_hosts(self, known: set) -> None:
        """A host whose port went down is forgotten (NetworkMap.remove_port); so are the flows
        toward it. Only toward hosts `known` before: an adopted tree's host is not known yet."""
        for key in [k for k in self.trees if k[1] in known and self.net.host_by_ip(k[1]) is None]:
            self._drop(key)

    def _drop(self, key) -> None:
        for dpid, out_port in self.trees.pop(key, {}).items():
            self._change_hop(*key, dpid, out_port, add=False)

    def _change_hop(self, agg: str, dst_ip: str, dpid: int, out_port: int, *, add: bool) -> None:
        dp = self.datapaths.get(dpid)
        if dp is None:
            return
        flow = switch_state.hop_flow(self.in_force.plan.hop_flow(
            agg, dst_ip, dpid, out_port, self.switch_hosts.port_state.get((dpid, out_port))))
        if add:
            self.sync.change(dp, add=[flow])
        else:
            self.sync.change(dp, delete=[flow])

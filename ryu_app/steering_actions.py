"""What heavy-hitter detection asks of the switches (ryu_app.heavy_hitters.SwitchActions):
a flow steered into the penalized aggregate on every switch, and released; a counting flow
for a suspect on one switch, and removed; the counting and steering flows' byte counters."""

from __future__ import annotations

from coex import switch_state
from coex.forwarding import PENALIZED, PRIO_COUNT, PRIO_STEER
from coex.topology import NoPath
from ryu_app import flows


class SteeringActions:
    def __init__(self, *, net, datapaths, sync, trees, in_force, counters, logger):
        self.net, self.datapaths, self.sync, self.trees = net, datapaths, sync, trees
        self.in_force, self.counters, self.logger = in_force, counters, logger
        self.steered: set = set()  # flow keys steered into 'penalized'

    def steer(self, key) -> None:
        """Put one flow into the penalized aggregate on every switch (above every rule).

        The penalized tree toward its destination goes in first, so its packets never miss
        table 1 and wait for the controller: a heavy hitter is the flow whose packets a
        busy controller can least afford to see one by one."""
        self.steered.add(key)
        dst = self.net.host_by_ip(key.dst_ip)
        if dst is not None:
            try:
                self.trees.install(PENALIZED, dst)
            except NoPath as err:  # packet-ins for the flow will say so again
                self.logger.warning("no penalized path %s -> %s: %s", key.src_ip, key.dst_ip, err)
        for dp in list(self.datapaths.values()):
            self.sync.change(dp, add=[switch_state.classify_flow(self.in_force.plan.steer_flow(key))])

    def unsteer(self, key) -> None:
        self.steered.discard(key)
        for dp in list(self.datapaths.values()):
            self.sync.change(dp, delete=[switch_state.classify_flow(self.in_force.plan.steer_flow(key))])

    def install_counting(self, dpid: int, key) -> bool:
        """A counting flow for one suspect (coex/counting.py) on switch dpid; False if the switch
        is not connected or the flow's 5-tuple cannot say how the rules would treat it."""
        dp, flow = self.datapaths.get(dpid), self.in_force.plan.count_flow(key)
        if dp is None or flow is None:
            return False
        self.sync.change(dp, add=[switch_state.classify_flow(flow, counting=True)])
        return True

    def remove_counting(self, dpid: int, key) -> None:
        dp = self.datapaths.get(dpid)
        if dp is not None:  # by its key and cookie alone: what it did may have changed with the policy
            self.sync.change(dp, delete=[switch_state.Flow(switch_state.TABLE_CLASSIFY, PRIO_COUNT,
                                                           switch_state.five_tuple_match(key),
                                                           cookie=switch_state.COUNT_COOKIE)])

    def classify_counters(self, dpid: int, timeout_s: float) -> list | None:
        """(priority, flow key, bytes) of the switch's counting and steering flows, read now;
        None if it did not answer within timeout_s."""
        entries = self.counters.read(timeout_s, flows.classify_flow_stats_request, [dpid]).get(dpid)
        if entries is None:
            return None
        return [(e.priority, flows.flow_key_of(e.match), e.byte_count) for e in entries
                if e.priority in (PRIO_COUNT, PRIO_STEER)]

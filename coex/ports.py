"""Bottleneck ports: which discipline a ckcd-link port runs, and the record of what the
controller configured on each policy port.

Pure: the discipline is a spec string in ckcd-link's grammar (the same grammar as
coex.policy.AqmSpec.spec); ryu_app hands it to ovs_config.aqm, which talks to the daemon.
"""

from __future__ import annotations

import dataclasses

from coex import planner
from coex.disciplines import spec_text
from coex.planner import QueueClass, QueuePlan
from coex.policy import Policy, Port

WAITING = "waiting for the switch"
APPLIED = "applied"
LINK_FALLBACK_SPEC = "droptail limit=1000"  # a link that does not say what it runs


@dataclasses.dataclass
class PortState:
    """What the controller configured on one policy port; GET /coex/v1/state shows it
    (to_dict), and the forwarding plan reads its queue backend."""
    name: str | None = None               # the switch's interface name, once the switch is known
    queue_backend: str | None = None      # ckcd-link, tc-htb or ovsdb-queue
    aqm_backend: str | None = None        # ckcd-link or sch_ckcd (the kernel qdisc through its agent)
    queues: tuple[QueueClass, ...] | None = None  # the queue plan applied (Separate Queues)
    discipline: str | None = None         # the spec attached
    qdisc: dict | None = None             # sch_ckcd: the agent's last report (applied, error, tc stats)
    status: str = WAITING                 # WAITING, APPLIED or 'error: ...'

    def to_dict(self) -> dict:
        """Only what was configured, in field order (the REST answer's shape)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def bands_spec(plan: QueuePlan, band_discipline: str = "droptail limit=80",
               penalized_aggregate: str | None = "penalized") -> str:
    """The ckcd-link `bands` spec for a queue plan: one band per aggregate, DSCP-mapped."""
    classes = sorted(plan.classes, key=lambda c: c.index)
    params = {"weights": ",".join(str(c.weight) for c in classes),
              "map": ",".join(f"{c.dscp}:{c.index}" for c in classes if c.index != plan.default_index),
              "default": plan.default_index}
    pen = [c.index for c in classes if c.aggregate == penalized_aggregate]
    if pen:
        params["penalized"] = pen[0]
    return " | ".join([spec_text("bands", params)] + [band_discipline] * len(classes))


def link_discipline(policy: Policy, port: Port, base_spec: str) -> str:
    """The egress discipline of a ckcd-link port: under Separate Queues one band per
    aggregate, each band running the port's AQM; else the port's AQM; without one, what
    the link ran before the policy touched it (`base_spec`)."""
    band = port.aqm.spec(port.capacity_bps) if port.aqm else base_spec
    if policy.approaches.separate_queues:
        return bands_spec(planner.queue_plan(policy, port), band_discipline=band)
    return band

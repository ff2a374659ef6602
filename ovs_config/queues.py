"""Separate Queues on a switch port: one interface, three backends.

- "ckcd-link": the port's link is emulated by ckcd-link (our machines' bottleneck).
  The switch marks DSCP per aggregate; the daemon's `bands` discipline maps DSCP to
  a band per aggregate, shared by weight with DRR (work-conserving).
- "tc-htb": a plain switch port of the userspace datapath. The switch marks DSCP;
  an HTB class per aggregate (rate = weighted share, ceil = the port: it borrows
  what others leave) with u32 filters on the TOS byte classifies. set_queue is
  useless here: the userspace datapath loses the skb priority on its AF_PACKET send.
- "ovsdb-queue": a kernel-datapath host. OVSDB QoS/Queue rows (linux-htb) and the
  flow's set_queue action, the way seed 001 describes (queue N -> HTB class 1:N+1).

choose_backend() picks per port from what the host has; the controller shows the
choice in its state.
"""

from __future__ import annotations

import re
import subprocess

from coex.planner import QueuePlan
from coex.ports import bands_spec  # noqa: F401 (moved to the core, beside AqmSpec.spec)
from ovs_config import aqm
from ovs_config.ovsdb import LOCAL, Ovsdb, OvsdbError

HTB_MAJOR = "1:"
HTB_ROOT = "1:1"


class QueueBackendError(RuntimeError):
    pass


def _run(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise QueueBackendError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def choose_backend(port_name: str, aqm_backend: str | None, preferred: str = "auto", db: Ovsdb = LOCAL) -> str:
    """ckcd-link where the port has one; else `preferred`, or by the bridge's datapath when
    that is "auto". Forcing "ovsdb-queue" on a userspace bridge still creates the QoS rows
    and tc classes for real (OVS's linux-htb), only set_queue does not classify there.
    tc-htb runs tc here, so it is refused for a switch host across the network. aqm_backend:
    what aqm.backend_of() says of the port (the caller asks once for both choices)."""
    if aqm_backend == aqm.LINK_BACKEND:
        return "ckcd-link"
    if preferred == "auto":
        preferred = "ovsdb-queue" if aqm.kernel_datapath(port_name, db) else "tc-htb"
    if preferred == "tc-htb" and not db.is_local:
        raise QueueBackendError(f"tc-htb needs the port on this machine, but {port_name} is on {db.where}: "
                                "use ovsdb-queue (CKCD_COEX_QUEUE_BACKEND=auto picks it for kernel bridges)")
    return preferred


# --- tc HTB + u32 (userspace datapath) ----------------------------------------------

def tc_htb_commands(dev: str, plan: QueuePlan) -> list[list[str]]:
    """The tc commands that give `dev` one HTB class per aggregate of the plan."""
    cap = plan.capacity_bps
    default_minor = 10 + plan.default_index
    cmds = [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", HTB_MAJOR, "htb",
         "default", str(default_minor)],
        ["tc", "class", "replace", "dev", dev, "parent", HTB_MAJOR, "classid", HTB_ROOT, "htb",
         "rate", f"{cap}bit", "ceil", f"{cap}bit"],
    ]
    for c in plan.classes:
        classid = f"1:{10 + c.index}"
        cmds.append(["tc", "class", "replace", "dev", dev, "parent", HTB_ROOT, "classid", classid,
                     "htb", "rate", f"{max(c.rate_bps, 8000)}bit", "ceil", f"{c.ceil_bps}bit"])
        if c.index != plan.default_index:
            cmds.append(["tc", "filter", "add", "dev", dev, "parent", HTB_MAJOR, "protocol", "ip",
                         "prio", "1", "u32", "match", "ip", "tos", f"{c.dscp << 2:#04x}", "0xfc",
                         "flowid", classid])
    return cmds


def apply_tc_htb(dev: str, plan: QueuePlan) -> None:
    clear_tc(dev)
    for cmd in tc_htb_commands(dev, plan):
        _run(cmd)


def clear_tc(dev: str) -> None:
    subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=10)


# --- OVSDB QoS/Queue (kernel datapath hosts) ------------------------------------------------

def ovsdb_queue_commands(port_name: str, plan: QueuePlan) -> list[str]:
    """ovs-vsctl arguments for linux-htb QoS with one Queue per aggregate (queue id = index).
    The rows carry external_ids:ckcd-coex=true, so clearing removes ours and only ours."""
    args = ["--", "set", "Port", port_name, "qos=@coexqos", "--", "--id=@coexqos", "create", "QoS",
            "type=linux-htb", f"other-config:max-rate={plan.capacity_bps}", "external_ids:ckcd-coex=true"]
    args += [f"queues:{c.index}=@q{c.index}" for c in plan.classes]
    for c in plan.classes:
        args += ["--", f"--id=@q{c.index}", "create", "Queue",
                 f"other-config:min-rate={c.rate_bps}", f"other-config:max-rate={c.ceil_bps}",
                 "external_ids:ckcd-coex=true"]
    return args


def apply_ovsdb_queues(port_name: str, plan: QueuePlan, db: Ovsdb = LOCAL) -> None:
    clear_ovsdb_queues(port_name, db)
    try:
        db.vsctl(*ovsdb_queue_commands(port_name, plan))
    except OvsdbError as err:
        raise QueueBackendError(str(err)) from None


def clear_ovsdb_queues(port_name: str, db: Ovsdb = LOCAL) -> None:
    """Take our linux-htb QoS off the port and destroy its rows (QoS and Queue are root
    tables: an unreferenced row stays in the database until destroyed)."""
    qos = db.our_qos(port_name, "linux-htb")
    if qos is None:
        return
    queues = re.findall(r"[0-9a-f]{8}-[0-9a-f-]{27}", db.get("QoS", qos, "queues") or "")
    cmd = ["--", "clear", "Port", port_name, "qos", "--", "destroy", "QoS", qos]
    for q in queues:
        cmd += ["--", "destroy", "Queue", q]
    db.vsctl(*cmd)

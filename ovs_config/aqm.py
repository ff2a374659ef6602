"""Attach a queue discipline to a switch port: "discipline D with params P on port X".

On our machines the only AQM backend is ckcd-link: a port served by it (see
ovs_config/bottleneck.py) gets its discipline through the daemon's control socket,
for the direction that leaves the switch through that port. A kernel with AQM
qdiscs would get a second backend here (tc qdisc on the port, later sch_ckcd); this
host has none, so other ports are refused with a message that says so.
"""

from __future__ import annotations

import subprocess

from ovs_config.link_daemon import LinkControl, LinkDaemonError


class AqmBackendError(RuntimeError):
    pass


def _external_id(port_name: str, key: str) -> str | None:
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "get", "Interface", port_name,
                          f"external_ids:{key}"], capture_output=True, text=True, timeout=10)
    value = out.stdout.strip().strip('"')
    return value if out.returncode == 0 and value else None


def link_of_port(port_name: str) -> tuple[LinkControl, str] | None:
    """The ckcd-link serving this port and the direction leaving the switch through it."""
    sock = _external_id(port_name, "ckcd-link-ctl")
    if sock is None:
        return None
    return LinkControl(sock), _external_id(port_name, "ckcd-link-dir") or "ab"


def backend_of(port_name: str) -> str | None:
    return "ckcd-link" if _external_id(port_name, "ckcd-link-ctl") else None


def attach_discipline(port_name: str, spec: str) -> dict:
    """Set the egress discipline of the port; queued packets are kept. Returns the daemon's config."""
    link = link_of_port(port_name)
    if link is None:
        raise AqmBackendError(f"port {port_name} has no AQM backend on this host: it is not served by "
                              "ckcd-link and the kernel has no AQM qdiscs")
    control, direction = link
    try:
        control.set_qdisc(direction, spec)
        return control.show()
    except (LinkDaemonError, OSError) as err:
        raise AqmBackendError(f"ckcd-link refused {spec!r} on {port_name}: {err}") from None


def current_discipline(port_name: str) -> str | None:
    """The spec ckcd-link runs now on the port's egress direction, or None."""
    link = link_of_port(port_name)
    if link is None:
        return None
    control, direction = link
    try:
        return control.show()["dirs"][direction]["qdisc"]
    except (LinkDaemonError, OSError, KeyError):
        return None

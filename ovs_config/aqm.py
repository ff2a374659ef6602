"""Attach a queue discipline to a switch port: "discipline D with params P on port X".

On our machines the only AQM backend is ckcd-link: a port served by it (see
ovs_config/bottleneck.py) gets its discipline through the daemon's control socket,
for the direction that leaves the switch through that port. A kernel with AQM
qdiscs would get a second backend here (tc qdisc on the port, later sch_ckcd); this
host has none, so other ports are refused with a message that says so.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from coex.disciplines import HOST_PAIR_VALUE
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


def link_ports() -> dict[str, tuple[str, str]]:
    """Every interface a ckcd-link serves: name -> (control socket, direction leaving the
    switch through it). One ovs-vsctl call, for readers that look at all ports at once
    (GET /metrics at each scrape)."""
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "--format=json", "--columns=name,external_ids",
                          "list", "Interface"], capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        return {}
    ports = {}
    for name, ids in json.loads(out.stdout).get("data", []):
        ids = dict(ids[1]) if isinstance(ids, list) and ids and ids[0] == "map" else {}
        if ids.get("ckcd-link-ctl"):
            ports[name] = (ids["ckcd-link-ctl"], ids.get("ckcd-link-dir") or "ab")
    return ports


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


REPLAY_BINARY = Path(__file__).resolve().parent.parent / "datapath" / "build" / "ckcd-replay"
_QUOTED_PARAM = re.compile(r"parameter '([a-z_]+)'")


class AqmSpecError(ValueError):
    """The core refuses a discipline spec; `param` names the parameter when it says which."""

    def __init__(self, message: str, param: str | None):
        super().__init__(message)
        self.message, self.param = message, param


def check_spec(spec: str, rate_bps: int, binary: Path = REPLAY_BINARY) -> None:
    """Ask the core itself whether it takes this spec on a link of rate_bps (as ckcd-link
    would create it: a rate_bps the spec leaves out is the link's). The relations between
    parameters (RED's min below max, CKCD's qmin against its BDP) are in the disciplines'
    init code only; `ckcd-replay --describe` runs exactly that code, so nothing is written
    twice. Raises AqmSpecError with the core's message.

    A host pair named by address (hdcodel's heavy_key=10.0.0.1>10.0.0.3) is ckcd-link's to
    resolve into its per-run key; ckcd-replay has no addresses, so the check puts a number in
    its place (coex.disciplines.host_pair_problem has checked its form)."""
    spec = HOST_PAIR_VALUE.sub("0", spec)
    try:
        done = subprocess.run([str(binary), "--describe", "--rate-bps", str(rate_bps), "--qdisc", spec],
                              capture_output=True, text=True, timeout=10)
    except OSError as err:
        raise AqmBackendError(f"cannot check disciplines: {binary}: {err.strerror} (make -C datapath)") \
            from None
    if done.returncode == 0:
        return
    message = done.stderr.strip().removeprefix("ckcd-replay: ")
    if done.returncode != 2 or not message:
        raise AqmBackendError(f"{binary} failed ({done.returncode}) on {spec!r}: {message}")
    found = _QUOTED_PARAM.search(message)
    raise AqmSpecError(message, found.group(1) if found else None)

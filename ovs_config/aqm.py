"""Attach a queue discipline to a switch port: "discipline D with params P on port X".

Two backends, chosen per port from what its switch host has:
- "ckcd-link": the port's link is emulated by ckcd-link (our machines' bottleneck, see
  ovs_config/bottleneck.py); the discipline goes to the daemon's control socket, for the
  direction that leaves the switch through that port. The daemon runs beside the
  controller, so this backend is for local switches only.
- "sch_ckcd": a port of a kernel-datapath switch host whose ckcd-qdisc-agent runs
  (datapath/kernel/ckcd-qdisc-agent). The controller writes the spec into the port's
  Interface row over OVSDB (local or remote) and the agent, on the switch host, runs tc:
  the `ckcd` qdisc at the port's root, shaped to its capacity, with the Port's QoS set to
  linux-noop so vswitchd leaves it alone - or, when OVS's linux-htb queues are the Port's
  QoS (Separate Queues), as the leaf of every queue. The agent answers in the same row.

Every function takes the switch host's database (ovs_config.ovsdb.Ovsdb); the default is
this machine's. Other ports are refused with a message that says why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from coex.disciplines import HOST_PAIR_VALUE
from ovs_config.link_daemon import LinkControl, LinkDaemonError
from ovs_config.ovsdb import LOCAL, Ovsdb, OvsdbError

LINK_BACKEND, KERNEL_BACKEND = "ckcd-link", "sch_ckcd"
AGENT_KEY = "ckcd-qdisc-agent"       # Open_vSwitch external_ids: the agent runs there
SAVED_QOS_KEY = "ckcd-saved-qos"     # Port external_ids: the QoS the port had before ours
AGENT_ANSWER_S = 8.0                 # the agent's round is 1 s; TCG switch hosts are slow


class AqmBackendError(RuntimeError):
    pass


def interface_ids(port_name: str, db: Ovsdb = LOCAL) -> dict:
    """The Interface row's external_ids ({} when there is no such interface)."""
    row = db.find_one("Interface", port_name, ("external_ids",))
    ids = row["external_ids"] if row else {}
    return ids if isinstance(ids, dict) else {}


def _quoted(text: str) -> str:
    """A value for ovs-vsctl's `set` as an OVSDB string (JSON quoting is its syntax)."""
    return json.dumps(text)


# --- ckcd-link ports ------------------------------------------------------------------

def link_of_port(port_name: str, db: Ovsdb = LOCAL) -> tuple[LinkControl, str] | None:
    """The ckcd-link serving this port and the direction leaving the switch through it."""
    ids = interface_ids(port_name, db)
    if not ids.get("ckcd-link-ctl"):
        return None
    return LinkControl(ids["ckcd-link-ctl"]), ids.get("ckcd-link-dir") or "ab"


def link_ports(db: Ovsdb = LOCAL) -> dict[str, tuple[str, str]]:
    """Every interface a ckcd-link serves: name -> (control socket, direction leaving the
    switch through it). One ovs-vsctl call, for readers that look at all ports at once
    (GET /metrics at each scrape)."""
    try:
        rows = db.rows("Interface", ("name", "external_ids"))
    except OvsdbError:
        return {}
    return {r["name"]: (r["external_ids"]["ckcd-link-ctl"], r["external_ids"].get("ckcd-link-dir") or "ab")
            for r in rows if isinstance(r["external_ids"], dict) and r["external_ids"].get("ckcd-link-ctl")}


# --- which backend ----------------------------------------------------------------------

def backend_of(port_name: str, db: Ovsdb = LOCAL) -> str | None:
    """ckcd-link, sch_ckcd or None (the port cannot take a discipline). Raises OvsdbError
    when the switch host's database does not answer."""
    if interface_ids(port_name, db).get("ckcd-link-ctl"):
        return LINK_BACKEND if db.is_local else None
    if kernel_datapath(port_name, db) and db.get("Open_vSwitch", ".", f"external_ids:{AGENT_KEY}"):
        return KERNEL_BACKEND
    return None


def kernel_datapath(port_name: str, db: Ovsdb = LOCAL) -> bool:
    """Is the port on a bridge of the kernel datapath (datapath_type "" or "system")?"""
    bridge = db.vsctl("port-to-br", port_name).strip()
    return (db.get("Bridge", bridge, "datapath_type") or "system") == "system"


def no_backend_reason(port_name: str, db: Ovsdb = LOCAL) -> str:
    """Why backend_of() found none, in one sentence for the operator."""
    if not kernel_datapath(port_name, db):
        return (f"port {port_name} has no AQM backend: it is not served by ckcd-link and its bridge is a "
                "userspace (netdev) bridge, which no qdisc can sit on")
    return (f"port {port_name} has no AQM backend: it is on a kernel-datapath bridge of {db.where}, but no "
            "ckcd-qdisc-agent runs there (docs/real-switches.md)")


# --- attach and detach --------------------------------------------------------------------

def attach_discipline(port_name: str, spec: str, db: Ovsdb = LOCAL, *, backend: str = LINK_BACKEND,
                      rate_bps: int | None = None, own_root: bool = True) -> dict:
    """Set the egress discipline of the port. ckcd-link: queued packets are kept; returns the
    daemon's config. sch_ckcd: the agent's answer, {"applied": spec, "stats": ...}; own_root
    False leaves the root to OVS's linux-htb queues and puts the spec under each of them."""
    if backend == KERNEL_BACKEND:
        return _attach_kernel(port_name, spec, db, rate_bps, own_root)
    link = link_of_port(port_name, db)
    if link is None:
        raise AqmBackendError(f"port {port_name} has no AQM backend on this host: it is not served by "
                              "ckcd-link and the kernel has no AQM qdiscs")
    control, direction = link
    try:
        control.set_qdisc(direction, spec)
        return control.show()
    except (LinkDaemonError, OSError) as err:
        raise AqmBackendError(f"ckcd-link refused {spec!r} on {port_name}: {err}") from None


def current_discipline(port_name: str, db: Ovsdb = LOCAL) -> str | None:
    """The spec ckcd-link runs now on the port's egress direction, or None."""
    link = link_of_port(port_name, db)
    if link is None:
        return None
    control, direction = link
    try:
        return control.show()["dirs"][direction]["qdisc"]
    except (LinkDaemonError, OSError, KeyError):
        return None


def _attach_kernel(port_name: str, spec: str, db: Ovsdb, rate_bps: int | None, own_root: bool) -> dict:
    # A stale error from an earlier try must not be read as the answer to this one.
    cmd = ["set", "Interface", port_name, f"external_ids:ckcd-qdisc={_quoted(spec)}",
           "external_ids:ckcd-qdisc-managed=true",
           "--", "--if-exists", "remove", "Interface", port_name, "external_ids", "ckcd-qdisc-error"]
    if rate_bps:
        cmd += ["--", "set", "Interface", port_name, f"external_ids:ckcd-qdisc-rate-bps={rate_bps}"]
    else:
        cmd += ["--", "--if-exists", "remove", "Interface", port_name, "external_ids", "ckcd-qdisc-rate-bps"]
    if own_root:
        cmd += _own_root_commands(port_name, db)
    db.vsctl(*cmd)
    return _await_agent(port_name, db, lambda ids: ids.get("ckcd-qdisc-applied") == spec,
                        f"apply {spec!r}", error_fails=True)


def _own_root_commands(port_name: str, db: Ovsdb) -> list[str]:
    """QoS linux-noop on the port (vswitchd then leaves its qdisc to us), remembering the QoS
    it had so detach can give it back. Nothing when the port already has our noop row."""
    if db.our_qos(port_name, "linux-noop") is not None:
        return []
    qos = db.get("Port", port_name, "qos")
    cmd = ["--", "--id=@noop", "create", "QoS", "type=linux-noop", "external_ids:ckcd-coex=true",
           "--", "set", "Port", port_name, "qos=@noop"]
    if db.get("Port", port_name, f"external_ids:{SAVED_QOS_KEY}") is None:
        saved = "none" if qos in (None, "[]") else qos
        cmd += ["--", "set", "Port", port_name, f"external_ids:{SAVED_QOS_KEY}={saved}"]
    return cmd


def detach_kernel(port_name: str, db: Ovsdb = LOCAL) -> None:
    """Withdraw the discipline: the agent deletes its qdiscs, and the port gets back the QoS
    it had before (OVS then reinstalls that QoS's qdisc), or none."""
    cmd = ["--", "--if-exists", "remove", "Interface", port_name, "external_ids", "ckcd-qdisc",
           "--", "--if-exists", "remove", "Interface", port_name, "external_ids", "ckcd-qdisc-rate-bps"]
    noop = db.our_qos(port_name, "linux-noop")
    saved = db.get("Port", port_name, f"external_ids:{SAVED_QOS_KEY}")
    if noop is not None:
        cmd += ["--", "clear", "Port", port_name, "qos", "--", "destroy", "QoS", noop]
        if saved not in (None, "none") and db.get("QoS", saved, "type") is not None:
            cmd += ["--", "set", "Port", port_name, f"qos={saved}"]
    if saved is not None:
        cmd += ["--", "remove", "Port", port_name, "external_ids", SAVED_QOS_KEY]
    db.vsctl(*cmd)
    _await_agent(port_name, db, lambda ids: "ckcd-qdisc-applied" not in ids, "release the port",
                 error_fails=False)


def kernel_status(port_name: str, db: Ovsdb = LOCAL) -> dict:
    """What the agent says about the port: applied spec, last error, the qdiscs' live stats
    (tc -s -j qdisc show, parsed) - for GET /state."""
    return _status_of(interface_ids(port_name, db))


def _status_of(ids: dict) -> dict:
    status = {"applied": ids.get("ckcd-qdisc-applied"), "error": ids.get("ckcd-qdisc-error")}
    try:
        qdiscs = json.loads(ids.get("ckcd-qdisc-stats") or "[]")
    except ValueError:
        qdiscs = []
    status["qdiscs"] = [q for q in qdiscs if isinstance(q, dict)] if isinstance(qdiscs, list) else []
    return {k: v for k, v in status.items() if v not in (None, [])}


def _await_agent(port_name: str, db: Ovsdb, done, what: str, error_fails: bool) -> dict:
    """Poll the Interface row until done(its external_ids); error_fails: the agent's
    ckcd-qdisc-error ends the wait as a failure (an apply; a release has nothing to refuse)."""
    deadline = time.monotonic() + AGENT_ANSWER_S
    while True:
        ids = interface_ids(port_name, db)
        if done(ids):
            return _status_of(ids)
        if error_fails and ids.get("ckcd-qdisc-error"):
            raise AqmBackendError(f"ckcd-qdisc-agent on {db.where} could not {what} on {port_name}: "
                                  f"{ids['ckcd-qdisc-error']}")
        if time.monotonic() > deadline:
            raise AqmBackendError(f"ckcd-qdisc-agent on {db.where} did not {what} on {port_name} within "
                                  f"{AGENT_ANSWER_S:g} s: is it running (docs/real-switches.md)?")
        time.sleep(0.25)


def _replay_binary() -> Path:
    """The checkout's ckcd-replay (make -C datapath), else one on PATH (an installed package
    has no datapath/ beside it)."""
    built = Path(__file__).resolve().parent.parent / "datapath" / "build" / "ckcd-replay"
    if built.exists():
        return built
    found = shutil.which("ckcd-replay")
    return Path(found) if found else built


REPLAY_BINARY = _replay_binary()


class AqmSpecError(ValueError):
    """The core refuses a discipline spec, typed (its struct aqm_error, as ckcd-replay
    --describe prints it): `param` names the parameter when it says which (for an unknown
    one, the name as given), `code` is the core's short name of why ("range", "conflict",
    "unknown-parameter", ...), `other` the parameter a conflict clashes with, `band` the
    band (from 0) of a bands spec the error is in; None when the core does not say."""

    def __init__(self, message: str, param: str | None, *, code: str | None = None,
                 other: str | None = None, band: int | None = None):
        super().__init__(message)
        self.message, self.param = message, param
        self.code, self.other, self.band = code, other, band


def _typed_refusal(stdout: str) -> dict:
    """ckcd-replay --describe's JSON line of a refused spec ({} if there is none)."""
    lines = stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def check_spec(spec: str, rate_bps: int, binary: Path = REPLAY_BINARY) -> None:
    """Ask the core itself whether it takes this spec on a link of rate_bps (as ckcd-link
    would create it: a rate_bps the spec leaves out is the link's). The relations between
    parameters (RED's min below max, CKCD's qmin against its BDP) are in the disciplines'
    init code only; `ckcd-replay --describe` runs exactly that code, so nothing is written
    twice. Raises AqmSpecError with the core's message and its typed fields (the JSON line
    ckcd-replay prints on stdout for a refused spec; no English is parsed).

    A host pair named by address (hdcodel's heavy_key=10.0.0.1>10.0.0.3) is ckcd-link's to
    resolve into its per-run key; ckcd-replay has no addresses, so the check puts a number in
    its place (coex.disciplines.host_pair_problem has checked its form)."""
    spec = HOST_PAIR_VALUE.sub("0", spec)
    try:
        done = subprocess.run([str(binary), "--describe", "--rate-bps", str(rate_bps), "--qdisc", spec],
                              capture_output=True, text=True, timeout=10)
    except OSError as err:
        raise AqmBackendError(f"cannot check disciplines: {binary}: {err.strerror} (make -C datapath in the "
                              "source, or ckcd-replay on PATH)") from None
    if done.returncode == 0:
        return
    message = done.stderr.strip().removeprefix("ckcd-replay: ")
    if done.returncode != 2 or not message:
        raise AqmBackendError(f"{binary} failed ({done.returncode}) on {spec!r}: {message}")
    typed = _typed_refusal(done.stdout)
    band = typed.get("band")
    raise AqmSpecError(message, typed.get("param"), code=typed.get("code"),
                       other=typed.get("other"), band=band if isinstance(band, int) else None)

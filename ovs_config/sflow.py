"""Turn the Open vSwitch sFlow agent on and off for a bridge.

The OVSDB form (measured working on the userspace datapath, `datapath_type=netdev`, 2026-11: OVS 3.1 sends
sFlow v5 datagrams, ~200 a second at 0.8 Gbit/s, up to ~1.4 kB each; docs/sflow.md):

    ovs-vsctl -- --id=@s create sflow agent=lo target='"127.0.0.1:6343"' \
              sampling=64 polling=10 header=128 -- set bridge s1 sflow=@s

One sFlow row per bridge: enabling again replaces the bridge's reference, and OVSDB
garbage-collects the old row (the sFlow table is not a root table). Arguments are
validated before any command runs; each ValueError names the parameter.

``vsctl`` is any callable taking ovs-vsctl arguments (``PrivateOVS().vsctl``); without
one, plain ``ovs-vsctl`` runs, which finds the private OVS through OVS_RUNDIR once
PrivateOVS has started in this process.
"""

from __future__ import annotations

import re
import subprocess
from typing import Callable, Optional, Sequence, Union

from coex.remotes import sflow_target as validate_target  # noqa: F401 - ovs_config.sflow.validate_target
from ovs_config.private_ovs import OVSError

DEFAULT_TARGET = "127.0.0.1:6343"
DEFAULT_AGENT = "lo"
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")  # Linux interface / bridge names
MAX_SAMPLING = 0xFFFFFFFF
MAX_POLLING_S = 3600
MIN_HEADER_BYTES, MAX_HEADER_BYTES = 14, 1024
# What the controller asks of the agents it runs (ensure_sflow). OVS's agent sends a datagram
# (at most 1400 bytes) when the next sample does not fit, or at its 1 s tick, so a sample waits
# for the samples that fill its datagram. With MTU frames, 128 bytes (OVS's default) puts ~6
# samples in a datagram, 512 two: at the 40 samples/s a flow at the threshold gives, the p95
# wait falls from 150 ms to 50 ms (bench/bench_sflow_batching.py). Above ~610 bytes OVS 3.1
# sends one sample per datagram (25 ms), but from ~620 it sends no flow sample at all: 512
# keeps a margin a record more or less in another OVS version cannot eat. docs/sflow.md.
CONTROLLER_HEADER_BYTES = 512

Vsctl = Callable[..., str]


def _plain_vsctl(*args: str, timeout: float = 20) -> str:
    try:
        out = subprocess.run(["ovs-vsctl", "--timeout=10", *args], capture_output=True,
                             text=True, timeout=timeout)
    except FileNotFoundError:
        raise OVSError("ovs-vsctl not found: run `make setup`") from None
    if out.returncode != 0:
        raise OVSError(f"ovs-vsctl {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def _check_name(name: str, value) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(f"{name} must be an interface/bridge name (1-15 of [A-Za-z0-9_.:-]), "
                         f"got {value!r}")
    return value


def sflow_command(bridge: str, sampling: int = 64, polling_s: int = 10,
                  target: Union[str, Sequence[str]] = DEFAULT_TARGET,
                  agent: str = DEFAULT_AGENT, header_bytes: int = 128) -> list[str]:
    """The ovs-vsctl arguments that create an sFlow row and attach it to ``bridge``.

    sampling: 1-in-N packet sampling rate (N >= 1). polling_s: counter polling interval
    in seconds (>= 1). target: one collector 'ip:port' or a list of them. agent: the
    interface whose address the datagrams carry as agent address. header_bytes: bytes of
    each sampled packet sent (sampled_header).
    """
    _check_name("bridge", bridge)
    _check_int("sampling", sampling, 1, MAX_SAMPLING)
    _check_int("polling_s", polling_s, 1, MAX_POLLING_S)
    _check_name("agent", agent)
    _check_int("header_bytes", header_bytes, MIN_HEADER_BYTES, MAX_HEADER_BYTES)
    if isinstance(target, str):
        targets = [target]
    elif isinstance(target, (list, tuple)):
        targets = list(target)
    else:
        raise ValueError(f"target must be 'ip:port' or a list of them, got {target!r}")
    if not targets:
        raise ValueError("target must name at least one collector")
    targets = [validate_target(t) for t in targets]
    target_set = "[" + ",".join(f'"{t}"' for t in targets) + "]" if len(targets) > 1 \
        else f'"{targets[0]}"'
    return ["--", "--id=@s", "create", "sflow", f"agent={agent}", f"target={target_set}",
            f"sampling={sampling}", f"polling={polling_s}", f"header={header_bytes}",
            "--", "set", "bridge", bridge, "sflow=@s"]


def enable_sflow(bridge: str, sampling: int = 64, polling_s: int = 10,
                 target: Union[str, Sequence[str]] = DEFAULT_TARGET,
                 agent: str = DEFAULT_AGENT, header_bytes: int = 128,
                 vsctl: Optional[Vsctl] = None) -> str:
    """Enable (or reconfigure) sFlow on ``bridge``. Returns the new sFlow row's UUID."""
    args = sflow_command(bridge, sampling, polling_s, target, agent, header_bytes)
    out = (vsctl or _plain_vsctl)(*args)
    return out.strip()


def ensure_sflow(bridge: str, sampling: int, polling_s: int, target: Union[str, Sequence[str]],
                 vsctl: Optional[Vsctl] = None, header_bytes: int = CONTROLLER_HEADER_BYTES) -> bool:
    """Have ``bridge``'s agent send to ``target`` (one collector or several) with these
    settings; True if it had to change. A bridge already doing so is left alone: a new row
    restarts the agent (its sequence numbers, its counters' polling)."""
    wanted = sorted({validate_target(t) for t in ([target] if isinstance(target, str) else target)})
    now = sflow_settings(bridge, vsctl=vsctl)
    if now and sorted(set(listed_targets(now.get("targets", "")))) == wanted \
            and now.get("sampling") == str(sampling) and now.get("polling") == str(polling_s) \
            and now.get("header") == str(header_bytes):
        return False
    enable_sflow(bridge, sampling=sampling, polling_s=polling_s, target=wanted, header_bytes=header_bytes,
                 vsctl=vsctl)
    return True


def listed_targets(column: str) -> list[str]:
    """The targets of ovs-vsctl's listing of the column, a set of quoted strings:
    ["127.0.0.1:6343", "[::1]:6343"] (one without brackets when it holds one)."""
    quoted = re.findall(r'"([^"]*)"', column)
    if quoted or column.strip() in ("", "[]"):
        return quoted
    return [column.strip()]  # an unquoted single value


def disable_sflow(bridge: str, vsctl: Optional[Vsctl] = None) -> None:
    """Detach sFlow from ``bridge`` (its row is garbage-collected). Idempotent."""
    _check_name("bridge", bridge)
    (vsctl or _plain_vsctl)("clear", "bridge", bridge, "sflow")


READ_TRIES = 3


def sflow_settings(bridge: str, vsctl: Optional[Vsctl] = None) -> Optional[dict]:
    """The bridge's sFlow row as a dict of raw ovs-vsctl column strings, or None if off.

    A change of settings is a new row (enable_sflow), so another writer (the leading
    controller instance setting the agents' targets) can replace the row between reading the
    bridge's reference and listing it: the reference is then read again, up to READ_TRIES."""
    _check_name("bridge", bridge)
    run = vsctl or _plain_vsctl
    for attempt in range(1, READ_TRIES + 1):
        ref = run("get", "bridge", bridge, "sflow").strip()
        if ref in ("", "[]"):
            return None
        try:
            out = run("--columns=agent,target,sampling,polling,header", "list", "sflow", ref)
            break
        except OVSError as err:
            if "no row" not in str(err) or attempt == READ_TRIES:
                raise
    settings = {}
    for line in out.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            settings[key.strip()] = value.strip()
    return settings

"""Congestion controls the lab's kernel lacks, loaded as BPF struct_ops for the length of a run.

The lab's kernel has only reno, cubic and bbr built in and loads no modules, but it has BPF
with BTF: a tcp_congestion_ops written in BPF (datapath/bpf, built with clang) registers with
`bpftool struct_ops register` and is then a congestion control like any other, by name, in
every network namespace. A run that names one loads it before the lab starts and unregisters
it after the lab is gone (its sockets and namespaces hold references until then), and checks
each step in /proc/sys/net/ipv4/tcp_available_congestion_control.

Registration is machine-wide, so our struct_ops maps carry the prefix `ckcd_bpf_`: one found
registered at the start of a run is a crashed run's (the lab lock means no other run is
ours), and is unregistered first; `ckcd-coex clean` does the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BPF_DIR = os.path.join(REPO, "datapath", "bpf")
BTF = "/sys/kernel/btf/vmlinux"
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
MAP_PREFIX = "ckcd_bpf_"
# How long an unregistered control may linger while the last sockets that used it close.
UNREGISTER_WAIT_S = 10.0


@dataclasses.dataclass(frozen=True)
class BpfControl:
    name: str        # the congestion control's name (iperf3 -C, TCP_CONGESTION, the sysctl)
    source: str      # datapath/bpf/<source>.bpf.c
    map_name: str    # the struct_ops map, which bpftool unregisters by name
    needs_ecn: bool  # negotiates ECN itself: must be its hosts' namespace default (docs)


BPF_CONTROLS = {c.name: c for c in (
    BpfControl("bpf_dctcp", "cc_dctcp", "ckcd_bpf_dctcp", needs_ecn=True),
    BpfControl("bpf_vegas", "cc_vegas", "ckcd_bpf_vegas", needs_ecn=False),
)}


class BpfUnavailable(RuntimeError):
    """BPF congestion controls cannot be loaded here; the message says why and what to do."""


def prerequisites_missing() -> str | None:
    if not os.path.exists(BTF):
        return f"this kernel has no BTF ({BTF}), which BPF congestion controls need"
    for tool, package in (("bpftool", "bpftool"), ("clang", "clang")):
        if shutil.which(tool) is None:
            return f"{tool} not found: install {package} (make setup-tests does)"
    if not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
        return "libbpf's headers not found: install libbpf-dev (make setup-tests does)"
    if os.geteuid() != 0:
        return "loading a BPF congestion control needs root"
    return None


def build() -> None:
    """The objects, by make (up to date: nothing is rebuilt)."""
    done = subprocess.run(["make", "-s", "-C", BPF_DIR], capture_output=True, text=True)
    if done.returncode != 0:
        raise BpfUnavailable(f"building datapath/bpf failed:\n{done.stderr.strip()[-1500:]}")


def available() -> set[str]:
    with open(AVAILABLE) as f:
        return set(f.read().split())


def _our_maps() -> dict[int, tuple[str, str]]:
    """id -> (name, state) of our struct_ops maps: INUSE (registered) or TOBEFREE (unregistered,
    freed by the kernel once the last socket or namespace that used it lets go)."""
    listed = json.loads(_bpftool_out("-j", "struct_ops", "list") or "[]")
    out = {}
    for entry in listed:
        if not str(entry.get("name", "")).startswith(MAP_PREFIX):
            continue
        try:
            text = _bpftool_out("-j", "struct_ops", "dump", "id", str(entry["id"]))
        except BpfUnavailable:
            continue  # freed between the list and the dump: a draining map's last socket closed
        # bpftool 7.1 prints a dump as two objects side by side, newer ones as one JSON array
        dump = json.loads(text if text.startswith("[") else "[" + text + "]")
        states = [d[k]["common"]["state"] for d in dump for k in d if isinstance(d[k], dict) and "common" in d[k]]
        out[entry["id"]] = (entry["name"], states[0] if states else "unknown")
    return out


def registered_maps() -> set[str]:
    """Our struct_ops maps registered now (a draining, unregistered one is not)."""
    return {name for name, state in _our_maps().values() if state == "BPF_STRUCT_OPS_STATE_INUSE"}


def draining_maps() -> set[str]:
    """Our maps unregistered but not yet freed: sockets of a torn-down lab still hold them."""
    return {name for name, state in _our_maps().values() if state != "BPF_STRUCT_OPS_STATE_INUSE"}


def _bpftool_out(*args: str) -> str:
    done = subprocess.run(["bpftool", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BpfUnavailable(f"bpftool {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _bpftool(*args: str) -> None:
    done = subprocess.run(["bpftool", "struct_ops", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BpfUnavailable(f"bpftool struct_ops {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")


def register(control: BpfControl) -> None:
    _bpftool("register", os.path.join(BPF_DIR, "build", f"{control.source}.bpf.o"))
    if control.name not in available():
        raise BpfUnavailable(f"{control.name} registered but not in {AVAILABLE}")


def unregister(map_name: str) -> list[int]:
    """Unregister our registered maps of this name (by id: a draining map may share the name)
    and wait until its control is gone from the kernel's list; returns the ids unregistered."""
    ids = []
    for map_id, (name, state) in _our_maps().items():
        if name == map_name and state == "BPF_STRUCT_OPS_STATE_INUSE":
            _bpftool("unregister", "id", str(map_id))
            ids.append(map_id)
    control = next((c.name for c in BPF_CONTROLS.values() if c.map_name == map_name), None)
    deadline = time.monotonic() + UNREGISTER_WAIT_S
    while control in available():
        if time.monotonic() > deadline:
            raise BpfUnavailable(f"{control} still listed {UNREGISTER_WAIT_S:g} s after unregistering")
        time.sleep(0.1)
    return ids


def remove_leftovers() -> list[str]:
    """Unregister every map of ours still registered (a crashed run's); returns their names.
    Draining ones are left to the kernel, which frees them when their last socket closes."""
    if shutil.which("bpftool") is None:
        return []
    left = sorted(registered_maps())
    for map_name in left:
        unregister(map_name)
    return left


@contextlib.contextmanager
def loaded(names):
    """The BPF congestion controls `names` registered for the block, unregistered after it
    (also on an error); nothing happens for an empty `names`."""
    controls = [BPF_CONTROLS[n] for n in sorted(set(names))]
    if not controls:
        yield []
        return
    why = prerequisites_missing()
    if why:
        raise BpfUnavailable(why)
    build()
    remove_leftovers()
    done = []
    try:
        for control in controls:
            register(control)
            done.append(control)
        yield [c.name for c in done]
    finally:
        _unload(done, failing=sys.exc_info()[1] is not None)


def _unload(done: list[BpfControl], failing: bool) -> None:
    """Unregister every control of `done` (one failing does not keep the others registered),
    then wait until the kernel frees them. An error here is raised only if the block itself
    did not fail: a lab's own error must not be reported as a BPF one."""
    ids, errors = [], []
    for control in reversed(done):
        try:
            ids += unregister(control.map_name)
        except BpfUnavailable as err:
            errors.append(str(err))
    try:
        _wait_freed(ids)
    except BpfUnavailable as err:
        errors.append(str(err))
    if errors and not failing:
        raise BpfUnavailable("; ".join(errors))
    for error in errors:
        print(f"bpf_cc: {error}", file=sys.stderr)


# How long the kernel may take to free an unregistered map: its last sockets are orphans of
# the torn-down lab, which the runner keeps to one retry (experiments/lab/hosts.py).
FREE_WAIT_S = 15.0


def _wait_freed(ids: list[int]) -> None:
    """Until the maps `ids` (this run's, unregistered) are freed; another run's draining map is
    not this run's to wait for."""
    deadline = time.monotonic() + FREE_WAIT_S
    while left := {name for map_id, (name, _) in _our_maps().items() if map_id in ids}:
        if time.monotonic() > deadline:
            raise BpfUnavailable(f"{', '.join(sorted(left))} unregistered but not freed after "
                                 f"{FREE_WAIT_S:g} s: sockets of the lab still use it")
        time.sleep(0.2)

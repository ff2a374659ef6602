"""A private Open vSwitch for the lab: its own database, run dir and daemons.

Nothing here touches an OVS the user already runs: ovsdb-server and
ovs-vswitchd are started with their own files under run_dir, and every OVS
client we (and Mininet) call finds them through OVS_RUNDIR/OVS_DBDIR/
OVS_LOGDIR in the environment, which start() sets and stop() restores.

The machine facts this encodes (see docs/architecture.md):
- no kernel module: bridges use the userspace datapath (datapath_type=netdev);
- vswitchd sends through one AF_PACKET socket whose buffer is
  net.core.wmem_default (~70 packets by default): raised before vswitchd starts;
- userspace TSO stays off (turning it on at run time corrupts traffic), so
  hosts and switch-side veths run with offloads off (topologies.offloads_off).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
DEFAULT_RUN_DIR = "/run/ckcd-coex/ovs"
WMEM_DEFAULT = 8388608
_ENV_KEYS = ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR")
OWNER_FILE = "owner.pid"  # the process that started the daemons (stop() is its job)
SYSTEM_OVSDB = "/var/run/openvswitch/db.sock"  # the machine's own OVS, if it runs one
# `ckcd-coex ovs start`: the private OVS a user's own `mn` runs on. A directory of its own, so that
# a lab's start never mistakes it for a dead run's leftovers (its starter exits at once).
MANUAL_RUN_DIR = "/run/ckcd-coex/manual-ovs"


class OVSError(RuntimeError):
    pass


def remove_leftover_interface(dev: str) -> bool:
    """Delete `dev` if a crashed lab run left it in the root namespace; True if there was one.
    Callers hold the lab lock, so no lab of ours is using it. One that the machine's own OVS
    holds belongs to someone else (another Mininet): refused, not broken."""
    if not os.path.exists(f"/sys/class/net/{dev}"):
        return False
    if os.path.exists(SYSTEM_OVSDB):
        owner = subprocess.run(["ovs-vsctl", f"--db=unix:{SYSTEM_OVSDB}", "--timeout=2", "port-to-br", dev],
                               capture_output=True, text=True)
        if owner.returncode == 0 and owner.stdout.strip():
            raise OVSError(f"interface {dev} belongs to bridge {owner.stdout.strip()} of this machine's own "
                           "Open vSwitch (another Mininet?): stop it (mn -c) before running the lab")
    subprocess.run(["ip", "link", "del", dev], capture_output=True)
    return True


def _run(cmd: list[str], env: dict | None = None, timeout: float = 20) -> str:
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise OVSError(f"{cmd[0]} not found: run `make setup` (installs openvswitch-switch)") from None
    if out.returncode != 0:
        raise OVSError(f"{' '.join(cmd)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def process_alive(pid: int) -> bool:
    """Whether pid runs. A zombie does not: where PID 1 does not reap orphans (containers,
    this VM) a daemon that exited stays a zombie, and kill(pid, 0) still succeeds on it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pid_alive(pidfile: str) -> int | None:
    try:
        pid = int(open(pidfile).read().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid) else None


def _refuse_beside_manual_ovs() -> None:
    """A lab does not start while a user's manual OVS runs: it holds no lab lock (it outlives the
    command that started it), yet its Mininet would share the lab's switch names and CPU."""
    manual = PrivateOVS(MANUAL_RUN_DIR)
    if manual.running():
        raise OVSError(f"a manual Open vSwitch (`ckcd-coex ovs start`, {MANUAL_RUN_DIR}) is running; the lab "
                       "does not run beside it: exit your Mininet, then `.venv/bin/ckcd-coex ovs stop`, "
                       "and run again")


class PrivateOVS:
    """Start/stop a private OVS. Idempotent; usable as a context manager."""

    def __init__(self, run_dir: str = DEFAULT_RUN_DIR):
        self.run_dir = run_dir
        self.db_sock = os.path.join(run_dir, "db.sock")
        self._saved_env: dict[str, str | None] = {}
        # The host's wmem_default before we raised it, kept on disk so that a
        # later `ckcd-coex clean` (another process) can still restore it.
        self._wmem_saved_path = os.path.join(run_dir, "wmem_default.saved")

    # Environment for every OVS client (ovs-vsctl, ovs-ofctl, Mininet's calls).
    def env(self) -> dict[str, str]:
        return {k: self.run_dir for k in _ENV_KEYS}

    def _pidfile(self, daemon: str) -> str:
        return os.path.join(self.run_dir, f"{daemon}.pid")

    def running(self) -> bool:
        return all(_pid_alive(self._pidfile(d)) for d in ("ovsdb-server", "ovs-vswitchd"))

    def vsctl(self, *args: str, timeout: float = 20) -> str:
        return _run(["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10", *args],
                    timeout=timeout)

    def _owner_alive(self) -> bool:
        """Whether the process that started the running daemons still lives."""
        return _pid_alive(os.path.join(self.run_dir, OWNER_FILE)) is not None

    def start(self) -> "PrivateOVS":
        if self.run_dir != MANUAL_RUN_DIR:
            _refuse_beside_manual_ovs()
        # Idempotent: an instance that finds the daemons running, started by a live process,
        # uses them and, on stop(), leaves them to it (a test session around an experiment run).
        # Daemons whose starter died (a killed run: no teardown) are leftovers: start afresh.
        self._started_here = not (self.running() and self._owner_alive())
        if self._started_here:
            self._stop_daemons()  # a half-started instance or a dead run's daemons
            os.makedirs(self.run_dir, exist_ok=True)
            self._raise_wmem()
            db = os.path.join(self.run_dir, "conf.db")
            if os.path.exists(db):
                os.unlink(db)
            _run(["ovsdb-tool", "create", db, OVS_SCHEMA])
            _run(["ovsdb-server", db, f"--remote=punix:{self.db_sock}",
                  f"--pidfile={self._pidfile('ovsdb-server')}",
                  f"--unixctl={os.path.join(self.run_dir, 'ovsdb-server.ctl')}",
                  f"--log-file={os.path.join(self.run_dir, 'ovsdb-server.log')}", "--detach"])
            self.vsctl("--no-wait", "init")
            # Before vswitchd starts: userspace TSO off (the default; on at run time corrupts TCP).
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                       "other_config:userspace-tso-enable=false")
            _run(["ovs-vswitchd", f"unix:{self.db_sock}",
                  f"--pidfile={self._pidfile('ovs-vswitchd')}",
                  f"--unixctl={os.path.join(self.run_dir, 'ovs-vswitchd.ctl')}",
                  f"--log-file={os.path.join(self.run_dir, 'ovs-vswitchd.log')}", "--detach"],
                 env={**os.environ, **self.env()})
            self._wait_ready()
            with open(os.path.join(self.run_dir, OWNER_FILE), "w") as f:
                f.write(f"{os.getpid()}\n")
        self._export_env()
        return self

    def _wait_ready(self, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self.vsctl("show", timeout=5)
                return
            except OVSError:
                time.sleep(0.2)
        raise OVSError(f"private OVS did not answer within {timeout_s:.0f} s; "
                       f"see {self.run_dir}/ovs-vswitchd.log")

    def _raise_wmem(self) -> None:
        path = "/proc/sys/net/core/wmem_default"
        current = open(path).read().strip()
        if int(current) < WMEM_DEFAULT:
            with open(self._wmem_saved_path, "w") as f:
                f.write(current)
            with open(path, "w") as f:
                f.write(str(WMEM_DEFAULT))

    def _export_env(self) -> None:
        for key, value in self.env().items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def _stop_daemons(self) -> None:
        # vswitchd first: its netdev ports and tap devices go with it.
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = _pid_alive(self._pidfile(daemon))
            if pid is None:
                continue
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if _pid_alive(self._pidfile(daemon)) is None:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)

    def stop(self, force: bool = False) -> None:
        """Stop the daemons this instance started (any running ones with force=True)."""
        if not (force or getattr(self, "_started_here", True)):
            self._restore_env()
            return
        if self.running():
            for br in self.vsctl("list-br").split():
                self.vsctl("--if-exists", "del-br", br)
        self._stop_daemons()
        if os.path.exists(self._wmem_saved_path):
            with open(self._wmem_saved_path) as saved, open("/proc/sys/net/core/wmem_default", "w") as f:
                f.write(saved.read().strip())
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self._restore_env()

    def __enter__(self) -> "PrivateOVS":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def ofctl(*args: str) -> str:
    """ovs-ofctl speaking OpenFlow 1.3 to a bridge of the current (private) OVS."""
    return _run(["ovs-ofctl", "-O", "OpenFlow13", *args])


def port_tx_bytes(bridge: str) -> dict[int, int]:
    """Bytes each OpenFlow port of the bridge has sent (ovs-ofctl dump-ports)."""
    counts = {}
    port = None
    for line in ofctl("dump-ports", bridge).splitlines():
        line = line.strip()
        if line.startswith("port"):
            head = line.split(":")[0].split()[-1]
            port = int(head) if head.isdigit() else None
        elif line.startswith("tx") and port is not None:
            for field in line.replace(",", " ").split():
                if field.startswith("bytes="):
                    counts[port] = int(field.split("=")[1]) if field.split("=")[1].isdigit() else 0
    return counts

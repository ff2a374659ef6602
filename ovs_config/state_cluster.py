"""A three-server OVSDB cluster for the controllers' shared state, on one machine: the lab's
and the tests' (docs/ha.md shows the same commands across three hosts).

Each server has its own directory entry under `workdir`: a database file made by
`ovsdb-tool create-cluster` (the first) or `join-cluster` (the others, which learn the rest
from the first when they start), a Raft address on a free loopback TCP port, a client socket
(`unix:<workdir>/sN.sock`) and a control socket. The servers are our children, stopped by
their PIDs; none is left running.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from coex.ovsdb_state import SCHEMA

DB_NAME = "CKCD_Coex"


def free_tcp_ports(n: int) -> list[int]:
    """n loopback TCP ports free now (the kernel's choice): two clusters started at once, or one
    a crashed run left behind, must not join each other's Raft."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class StateCluster:
    def __init__(self, workdir: str, size: int = 3):
        self.workdir, self.size = workdir, size
        self.raft = [f"tcp:127.0.0.1:{port}" for port in free_tcp_ports(size)]
        self.procs: list[subprocess.Popen | None] = [None] * size

    def path(self, i: int, suffix: str) -> str:
        return os.path.join(self.workdir, f"s{i + 1}.{suffix}")

    @property
    def remotes(self) -> str:
        """What CKCD_COEX_CLUSTER says: every server's client socket."""
        return ",".join(f"unix:{self.path(i, 'sock')}" for i in range(self.size))

    def create(self) -> "StateCluster":
        os.makedirs(self.workdir, exist_ok=True)
        subprocess.run(["ovsdb-tool", "create-cluster", self.path(0, "db"), SCHEMA, self.raft[0]], check=True)
        for i in range(1, self.size):
            subprocess.run(["ovsdb-tool", "join-cluster", self.path(i, "db"), DB_NAME, self.raft[i], self.raft[0]],
                           check=True)
        for i in range(self.size):
            self.start(i)
        self.wait_members()
        return self

    def start(self, i: int) -> None:
        log = open(self.path(i, "log"), "a")
        self.procs[i] = subprocess.Popen(
            ["ovsdb-server", "--no-chdir", f"--remote=punix:{self.path(i, 'sock')}",
             f"--unixctl={self.path(i, 'ctl')}", f"--log-file={self.path(i, 'ovsdb.log')}", self.path(i, "db")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def status(self, i: int) -> str:
        out = subprocess.run(["ovs-appctl", "-t", self.path(i, "ctl"), "cluster/status", DB_NAME],
                             capture_output=True, text=True, timeout=5)
        return out.stdout if out.returncode == 0 else ""

    def leader(self) -> int | None:
        """Which server leads the Raft cluster now (by its own word), if one does."""
        for i, p in enumerate(self.procs):
            if p is not None and p.poll() is None and "Role: leader" in self.status(i):
                return i
        return None

    def wait_members(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not (all("Status: cluster member" in self.status(i) for i, p in enumerate(self.procs) if p)
                   and self.leader() is not None):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the state cluster in {self.workdir} did not form within {timeout_s:.0f} s")
            time.sleep(0.2)

    def kill(self, i: int) -> None:
        """Server i dies (SIGKILL): the cluster goes on while a majority lives."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.procs[i] = None

    def stop(self) -> None:
        for i in range(self.size):
            self.kill(i)

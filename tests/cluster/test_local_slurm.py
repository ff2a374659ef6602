"""tests/cluster/local_slurm.py's teardown without Slurm: what it does with processes of its own that
stand in for slurmstepd, job processes and daemons. No root, no Slurm.

- Strays are scanned for again until none is left: one that forks as it is stopped (a job's shell
  starting a child in its TERM trap) does not outlive the cluster.
- A process is signalled only if its PID still names the process that was found (its start time,
  field 22 of /proc/PID/stat): a PID reused by another process is left alone.
- stop() runs every step even when one raises: a daemon that will not die (TimeoutExpired) does
  not leave munged running and its /run socket directory behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile

import pytest

from tests.cluster import local_slurm
from tests.cluster.local_slurm import MARKER, LocalSlurm
from tests.waiting import eventually

# A job's shell whose TERM trap starts a child and exits: the child carries the marker, and
# did not exist when the teardown first looked.
FORKS_WHEN_STOPPED = r"""
trap 'sleep 300 & exit 0' TERM
touch "$1"
while :; do sleep 0.1; done
"""


def _kill_left(cluster: LocalSlurm) -> None:
    for pid in cluster.marked_pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_strays_are_scanned_for_until_none_is_left(tmp_path):
    """Rule (no process outlives the cluster): a marked process that forks a marked child when it gets
    SIGTERM is stopped, and so is the child, which no snapshot taken before the SIGTERM had."""
    cluster = LocalSlurm(str(tmp_path / "c"))
    ready = tmp_path / "ready"
    shell = subprocess.Popen(["bash", "-c", FORKS_WHEN_STOPPED, "job", str(ready)],
                             env={**os.environ, MARKER: cluster.token})
    try:
        eventually(ready.exists, timeout_s=10, what="the job's TERM trap set")
        assert shell.pid in cluster.marked_pids()
        cluster._stop_marked()
        assert shell.wait(5) == 0  # it ran its trap: the child was started
        assert not cluster.marked_pids(), "the child the job started when stopped is still there"
    finally:
        shell.kill()
        _kill_left(cluster)
        shell.wait()


def test_a_reused_pid_is_not_signalled(tmp_path):
    """Rule (stop by PID, but only ours): a process found with PID P and start time S is signalled only
    while P still names a process started at S. Here P is held by an unrelated process that started
    later (as when the one found had exited and its PID was handed out again): it is left alone. The
    control: found with its own start time, the same process is stopped."""
    innocent = subprocess.Popen(["sleep", "300"])
    try:
        start = local_slurm._start_time(innocent.pid)
        assert start is not None
        scans = iter([[(innocent.pid, start - 1)]])  # the process that had the PID before
        local_slurm._terminate(lambda: next(scans, []), timeout_s=1.0)
        with pytest.raises(subprocess.TimeoutExpired):
            innocent.wait(0.5)  # still running: no signal reached it

        scans = iter([[(innocent.pid, start)]])
        local_slurm._terminate(lambda: next(scans, []), timeout_s=1.0)
        assert innocent.wait(5) == -signal.SIGTERM
    finally:
        innocent.kill()
        innocent.wait()


class _StuckDaemon:
    """A daemon in uninterruptible sleep (a hung NFS read, say): neither SIGTERM nor SIGKILL ends it
    within any wait, so Popen.wait raises TimeoutExpired."""
    pid = 2 ** 22 + 1  # above any PID (pid_max is at most 2**22): nothing of ours is mistaken for it

    def poll(self):
        return None

    def terminate(self):
        pass

    def kill(self):
        pass

    def wait(self, timeout=None):
        raise subprocess.TimeoutExpired(["slurmd"], timeout)


def test_stop_runs_every_step_when_a_daemon_will_not_die(tmp_path):
    """Rule (the harness cleans up): slurmd stuck, so stopping it raises TimeoutExpired; stop() still
    stops munged and removes the socket directory, then raises the error."""
    cluster = LocalSlurm(str(tmp_path / "c"), stop_timeout_s=0.5)
    munged = subprocess.Popen(["sleep", "300"])  # stands in for munged
    socket_dir = tempfile.mkdtemp(prefix="ckcd-slurm-test-", dir=str(tmp_path))
    cluster._procs = {"munged": munged, "slurmd": _StuckDaemon()}
    cluster._socket_dir = socket_dir
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            cluster.stop()
        assert munged.poll() is not None, "munged was left running"
        assert not os.path.exists(socket_dir), "the socket directory was left behind"
        assert cluster.socket_dir is None and not cluster.daemon_pids
    finally:
        munged.kill()
        munged.wait()

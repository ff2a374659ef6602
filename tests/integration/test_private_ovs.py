"""The private OVS's ownership rule, on real daemons in a run directory of the test's own (the
session's OVS, if one runs, is not touched): a run that died without teardown leaves daemons
the next start replaces; daemons whose starter lives are reused and left to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from ovs_config.lablock import lab_lock
from ovs_config.private_ovs import PrivateOVS, _pid_alive, process_alive
import pytest

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_dead_runs_daemons_are_replaced_and_a_live_owners_left_alone(lab_ready):
    run_dir = tempfile.mkdtemp(prefix="ckcd-ovs-t", dir="/run")  # short: unix socket paths
    vswitchd = os.path.join(run_dir, "ovs-vswitchd.pid")
    try:
        with lab_lock():
            # A run killed without teardown: started the daemons, then died (os._exit: no cleanup).
            subprocess.run([sys.executable, "-c",
                            "import os; from ovs_config.private_ovs import PrivateOVS; "
                            f"PrivateOVS(run_dir={run_dir!r}).start(); os._exit(0)"],
                           check=True, cwd=REPO, timeout=60)
            stale = _pid_alive(vswitchd)
            assert stale, "the dead run's vswitchd should still be running"
            owner = PrivateOVS(run_dir).start()
            try:
                fresh = _pid_alive(vswitchd)
                assert fresh and fresh != stale, "leftovers of a dead run are replaced"
                assert not process_alive(stale)
                nested = PrivateOVS(run_dir).start()  # e.g. an experiment inside a test session
                nested.stop()
                assert _pid_alive(vswitchd) == fresh, "a live owner's daemons are left to it"
            finally:
                owner.stop()
            assert not process_alive(fresh)
    finally:
        PrivateOVS(run_dir).stop(force=True)
        shutil.rmtree(run_dir, ignore_errors=True)

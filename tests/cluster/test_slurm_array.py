"""Slurm runs a sweep's array tasks one at a time per node: a private single-node cluster
(tests/cluster/local_slurm.py) runs 2-task arrays of trivial scripts, no lab.

The sweep script (cluster/sweep.sbatch) relies on one rule: with --exclusive, one task per node at
a time. The node has 2 CPUs and the cluster hands out single cores (select/cons_tres), so without
the flag the same two tasks run at once (the control below): their not overlapping with it is the
flag's doing, not the test cluster's.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.cluster.conftest import make_fake_checkout
from tests.cluster.local_slurm import LocalSlurm, prerequisites_missing
from tests.conftest import REPO
from tests.waiting import eventually

pytestmark = pytest.mark.lab

SWEEP = os.path.join(REPO, "cluster", "sweep.sbatch")

# Each task writes its start and end times; the two tasks of the control test also wait (up to
# 20 s) for each other's start, so they overlap by construction when Slurm lets them run at once.
TASK = r"""#!/bin/bash
set -eu
d=$1
date +%s.%N > "$d/start.$SLURM_ARRAY_TASK_ID"
if [ "${2:-}" = rendezvous ]; then
  other=$((1 - SLURM_ARRAY_TASK_ID))
  for _ in $(seq 200); do [ -e "$d/start.$other" ] && break; sleep 0.1; done
  [ -e "$d/start.$other" ] || exit 4
fi
sleep 2
date +%s.%N > "$d/end.$SLURM_ARRAY_TASK_ID"
"""


def _interval(d, task):
    with open(os.path.join(d, f"start.{task}")) as f, open(os.path.join(d, f"end.{task}")) as g:
        return float(f.read()), float(g.read())


def _submit_pair(slurm, tmp_path, options, mode=""):
    script = tmp_path / "task.sh"
    script.write_text(TASK)
    script.chmod(0o755)
    t0 = time.monotonic()
    job = slurm.sbatch(["--array=0-1", "--output=task-%A_%a.out", *options, str(script), str(tmp_path), mode],
                       cwd=str(tmp_path))
    ends = slurm.wait_job(job, timeout_s=60)
    print(f"job {job}: 2 tasks ended {time.monotonic() - t0:.1f} s after submission")
    return ends


def test_exclusive_array_tasks_take_turns_on_the_node(slurm, tmp_path):
    """Rule (one task per node at a time): the two tasks of an --exclusive array both run and exit 0,
    and one starts only after the other has ended."""
    ends = _submit_pair(slurm, tmp_path, ["--exclusive"])
    assert sorted(ends) == [0, 1]
    assert all(e.ok and e.node == slurm.node for e in ends.values()), ends
    (s0, e0), (s1, e1) = _interval(tmp_path, 0), _interval(tmp_path, 1)
    assert e0 <= s1 or e1 <= s0, f"the tasks overlapped: task 0 {s0:.2f}-{e0:.2f}, task 1 {s1:.2f}-{e1:.2f}"


def test_without_exclusive_the_same_tasks_share_the_node(slurm, tmp_path):
    """The control: without --exclusive the cluster does run both tasks at once."""
    ends = _submit_pair(slurm, tmp_path, [], "rendezvous")
    assert all(e.ok for e in ends.values()), ends  # exit 4: a task waited 20 s for the other in vain
    (s0, e0), (s1, e1) = _interval(tmp_path, 0), _interval(tmp_path, 1)
    assert s0 < e1 and s1 < e0


def test_sweep_script_runs_one_shard_per_task(slurm, tmp_path):
    """cluster/sweep.sbatch itself under Slurm (its own #SBATCH --exclusive, no flag on the command
    line), against a fake checkout: each task runs its shard into OUTDIR/shardI, the two never
    overlap, each task's exit code is the shard's (the fake fails shard 1 with 3), and the output
    goes to ckcd-sweep-JOB_I.out in the submit directory."""
    checkout = make_fake_checkout(tmp_path)
    with open(os.path.join(checkout, "fake_sleep"), "w") as f:
        f.write("1\n")  # a file: the script gives ckcd-coex none of the job's environment
    out = tmp_path / "sweep out"
    job = slurm.sbatch(["--array=0-1", SWEEP, str(out), "bbr_cubic", "--", "--repeat", "2"], cwd=str(tmp_path),
                       env={"CKCD_COEX_DIR": checkout})
    ends = slurm.wait_job(job, timeout_s=60)
    assert {t: (e.state, e.exit_code) for t, e in ends.items()} == {0: ("COMPLETED", 0), 1: ("FAILED", 3)}
    intervals = []
    for i in (0, 1):
        shard = out / f"shard{i}"
        argv = (shard / "argv").read_bytes().split(b"\0")[:-1]
        assert [a.decode() for a in argv] == ["run", "bbr_cubic", "--repeat", "2", "--shard", f"{i}/2", "--out",
                                              str(shard)]
        intervals.append((float((shard / "start").read_text()), float((shard / "end").read_text())))
        log = (tmp_path / f"ckcd-sweep-{job}_{i}.out").read_text()
        assert f"sweep.sbatch: shard {i}/2 on {slurm.node}" in log, log
    (s0, e0), (s1, e1) = intervals
    assert e0 <= s1 or e1 <= s0, f"the shards overlapped: {intervals}"


def test_a_failing_test_leaves_no_process_behind(tmp_path):
    """Rule (the harness cleans up): when the body of `with LocalSlurm()` raises while a job runs,
    the job, slurmstepd and the daemons are all gone afterwards (stopped by PID), its /run socket
    directory too, and run_dir stays."""
    why = prerequisites_missing()
    if why:
        pytest.fail(why)
    run_dir = str(tmp_path / "c")
    with pytest.raises(RuntimeError, match="the test failed"):
        with LocalSlurm(run_dir) as cluster:
            job = cluster.sbatch(["--output=/dev/null", "--wrap", "sleep 300"], cwd=str(tmp_path))
            eventually(lambda: any(r.state == "RUNNING" for r in cluster.job_records(job)), timeout_s=30,
                       what="the job running")
            daemons = list(cluster.daemon_pids.values())
            socket_dir = cluster.socket_dir
            assert len(cluster.marked_pids()) > len(daemons)  # the job's processes and slurmstepd too
            raise RuntimeError("the test failed")
    assert not cluster.marked_pids()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in daemons)
    assert not os.path.exists(socket_dir)
    assert os.path.exists(os.path.join(run_dir, "slurm.conf"))

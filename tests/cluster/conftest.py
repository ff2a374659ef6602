"""The cluster tests' fixtures: a private Slurm cluster per module, and a fake ckcd-coex checkout
for cluster/sweep.sbatch whose ckcd-coex records what it was asked to run."""

from __future__ import annotations

import os
import stat

import pytest

from tests.cluster.local_slurm import LocalSlurm, prerequisites_missing

# The fake `.venv/bin/ckcd-coex`: writes its argv (NUL-separated), working directory and start and
# end times into the --out directory it is given, sleeps $FAKE_SLEEP seconds, and exits 3 for
# shard 1 (0 otherwise), so a test can tell each array task's exit code apart. No lab.
FAKE_CKCD_COEX = r"""#!/bin/bash
set -eu
out= shard=
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]} ;;
    --shard) shard=${args[i + 1]} ;;
  esac
done
[ -n "${FAKE_RECORD:-}" ] && printf '%s\0' "$@" > "$FAKE_RECORD"
mkdir -p -- "$out"
date +%s.%N > "$out/start"
printf '%s\0' "$@" > "$out/argv"
pwd > "$out/cwd"
sleep "${FAKE_SLEEP:-0}"
date +%s.%N > "$out/end"
[ "${shard%%/*}" = 1 ] && exit 3
exit 0
"""

# A fake sudo, first in PATH when the tests do not run as root: the script must call `sudo -n -- CMD...`.
FAKE_SUDO = r"""#!/bin/bash
[ "${1:-}" = -n ] && [ "${2:-}" = -- ] || { echo "fake sudo: expected -n --, got $*" >&2; exit 99; }
shift 2
[ -n "${SUDO_RECORD:-}" ] && touch "$SUDO_RECORD"
exec "$@"
"""


def _write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_fake_checkout(root) -> str:
    """A directory that sweep.sbatch takes for a checkout: ckcd_coex.py and an executable .venv/bin/ckcd-coex."""
    checkout = os.path.join(str(root), "checkout")
    os.makedirs(os.path.join(checkout, ".venv", "bin"))
    open(os.path.join(checkout, "ckcd_coex.py"), "w").close()
    _write_exec(os.path.join(checkout, ".venv", "bin", "ckcd-coex"), FAKE_CKCD_COEX)
    return checkout


def make_fake_sudo(root) -> str:
    """A directory holding a fake `sudo`, to put first in PATH."""
    bindir = os.path.join(str(root), "fakebin")
    os.makedirs(bindir)
    _write_exec(os.path.join(bindir, "sudo"), FAKE_SUDO)
    return bindir


@pytest.fixture
def fake_checkout(tmp_path):
    return make_fake_checkout(tmp_path)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A private single-node Slurm cluster for one test module; all it started is stopped after."""
    why = prerequisites_missing()
    if why:
        pytest.fail(why)  # `make test` promises these tests run (as tests/conftest.py's lab_ready)
    with LocalSlurm(str(tmp_path_factory.mktemp("slurm"))) as cluster:
        print(f"local Slurm cluster up in {cluster.start_s:.1f} s")
        yield cluster
    assert not cluster.marked_pids(), "a process of the test cluster outlived it"

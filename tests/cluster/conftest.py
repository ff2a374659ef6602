"""The cluster tests' fixtures: a private Slurm cluster per module, and a fake ckcd-coex checkout
for cluster/sweep.sbatch whose ckcd-coex records what it was asked to run."""

from __future__ import annotations

import os
import stat

import pytest

from tests.cluster.local_slurm import LocalSlurm, prerequisites_missing

# The fake `.venv/bin/ckcd-coex`: writes its argv (NUL-separated), working directory and start and
# end times into the --out directory it is given, sleeps as long as the checkout's `fake_sleep`
# file says (0 without one), and exits 3 for shard 1 (0 otherwise), so a test can tell each array
# task's exit code apart. It also leaves its argv and the environment it was started with in the
# checkout (ran.argv, ran.environ; NUL-separated), a place no variable has to name: run as root,
# the script gives it a clean environment. No lab.
FAKE_CKCD_COEX = r"""#!/bin/bash
set -eu
here=${0%/.venv/bin/ckcd-coex}
out= shard=
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]} ;;
    --shard) shard=${args[i + 1]} ;;
  esac
done
printf '%s\0' "$@" > "$here/ran.argv"
cat "/proc/$$/environ" > "$here/ran.environ"
mkdir -p -- "$out"
date +%s.%N > "$out/start"
printf '%s\0' "$@" > "$out/argv"
pwd > "$out/cwd"
sleep "$(cat "$here/fake_sleep" 2>/dev/null || echo 0)"
date +%s.%N > "$out/end"
[ "${shard%%/*}" = 1 ] && exit 3
exit 0
"""

# A fake sudo, first in PATH when the script runs as another user; it appends each call's
# arguments (one line) to $SUDO_RECORD. `sudo -n -l -- CMD` (may CMD run without a password?)
# answers yes, and `sudo -n -- CMD...` runs CMD; with FAKE_SUDO_DENY set both fail as sudo does
# when no rule allows CMD or it needs a password (exit 1). Anything else is an error (99).
FAKE_SUDO = r"""#!/bin/bash
[ -n "${SUDO_RECORD:-}" ] && printf '%s\n' "$*" >> "$SUDO_RECORD"
if [ -n "${FAKE_SUDO_DENY:-}" ]; then
  echo "sudo: a password is required" >&2
  exit 1
fi
if [ "${1:-}" = -n ] && [ "${2:-}" = -l ] && [ "${3:-}" = -- ] && [ "$#" -eq 4 ]; then
  printf '%s\n' "$4"
  exit 0
fi
[ "${1:-}" = -n ] && [ "${2:-}" = -- ] || { echo "fake sudo: expected -n -- or -n -l --, got $*" >&2; exit 99; }
shift 2
exec "$@"
"""


def _write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_fake_checkout(root) -> str:
    """A directory that sweep.sbatch takes for a checkout: ckcd_coex.py and an executable .venv/bin/ckcd-coex.

    Made as a real checkout is: by its user (root, when the tests run as root), the directories
    0755 and ckcd-coex 0755 whatever the umask, so that run as root the script trusts it."""
    checkout = os.path.join(str(root), "checkout")
    os.makedirs(str(root), exist_ok=True)
    for d in (checkout, os.path.join(checkout, ".venv"), os.path.join(checkout, ".venv", "bin")):
        os.mkdir(d)
        os.chmod(d, 0o755)
    open(os.path.join(checkout, "ckcd_coex.py"), "w").close()
    fake = os.path.join(checkout, ".venv", "bin", "ckcd-coex")
    _write_exec(fake, FAKE_CKCD_COEX)
    os.chmod(fake, 0o755)
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

"""Debian's shellcheck finds nothing in our shell scripts: the root-run switch-host agent, the
CI entry point, the machine setup, `make dkms` and `make deb`. A finding at any severity (error, warning, info, style)
fails; a check a script turns off carries its reason beside it (`# shellcheck disable=...`)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO

SCRIPTS = ("datapath/kernel/ckcd-qdisc-agent", ".ci/run", "scripts/setup.sh", "scripts/dkms.sh",
           "scripts/deb.sh", "scripts/deb-changelog.sh")


@pytest.mark.parametrize("script", SCRIPTS)
def test_shellcheck_finds_nothing(script):
    """Rule (shell scripts pass shellcheck): `shellcheck SCRIPT` exits 0 and prints nothing."""
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck not found: run `make setup-tests` (installs Debian's shellcheck)")
    out = subprocess.run(["shellcheck", "--severity=style", os.path.join(REPO, script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr

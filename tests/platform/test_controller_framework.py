"""Which framework the tests' controller really runs: Ryu in make test's first leg, os-ken on
Debian 13's Python 3.13 in its second (--os-ken-leg). A leg whose controller silently fell
back to the other framework would test nothing new, so each checks the controller's own word."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from experiments.lab.net import Controller
from tests import conftest

pytestmark = pytest.mark.lab  # starts the real controller (root for its OVSDB calls, the lab's ports)

OF_PORT, REST_PORT = 16753, 18180


def test_controller_runs_the_legs_framework(lab_ready, tmp_path):
    """Rule: the controller's start line names the framework, its version and Python; the
    framework is the leg's (ryu, or os-ken under --os-ken-leg, then on Python 3.13)."""
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=str(tmp_path / "ctl.log"),
                     db_path=str(tmp_path / "policy.sqlite"))
    with ctl:
        pass
    m = re.search(r"controller loaded \(OpenFlow 1\.3, (\S+) (\S+), Python (\d+)\.(\d+)\.\d+\)", ctl.log())
    assert m, ctl.log()
    assert m.group(1) == conftest.EXPECTED_FRAMEWORK, ctl.log()
    assert m.group(2) != "None", ctl.log()  # a version from the installed distribution
    if conftest.EXPECTED_FRAMEWORK == "os-ken":
        assert (int(m.group(3)), int(m.group(4))) >= (3, 13), ctl.log()


def _python_of_leg() -> list[str]:
    """The interpreter the leg's controller runs on: the venv's, or the trixie root's os-ken venv."""
    import shlex
    import sys

    from experiments.lab.net import CONTROLLER_ENV

    if conftest.EXPECTED_FRAMEWORK == "os-ken":
        return shlex.split(os.environ[CONTROLLER_ENV])[:-2]  # without `-m ryu_app.launch`
    return [sys.executable]


def test_launcher_makes_every_blocking_module_green(lab_ready):
    """Rule: the os-ken launcher monkey-patches socket, select, time and thread, as ryu-manager
    does. (eventlet.monkey_patch(thread=True), os-ken's hub.patch, patches thread alone: the
    sFlow listener's recvfrom then blocked every green thread, and a flow-stats reply waited
    for the next timer, up to seconds.) Checked on the leg's own interpreter and eventlet."""
    code = ("import eventlet.patcher as p; from ryu_app.launch import green_everything; green_everything(); "
            "print(*[p.is_monkey_patched(m) for m in ('socket', 'select', 'time', 'thread')])")
    out = subprocess.run([*_python_of_leg(), "-W", "ignore", "-c", code], capture_output=True, text=True,
                         cwd=conftest.REPO, timeout=60)
    assert out.stdout.split() == ["True"] * 4, out.stdout + out.stderr

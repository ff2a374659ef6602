"""Shared fixtures. Lab fixtures hold the machine-wide lab lock while a lab exists."""

from __future__ import annotations

import os
import shlex
import shutil

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB_TOOLS = ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl", "ovs-ofctl", "mn", "iperf3", "ethtool", "ip")


def pytest_addoption(parser):
    parser.addoption("--os-ken-leg", action="store_true",
                     help="run every controller these tests start under os-ken on Debian 13's Python 3.13, "
                          "inside the cached trixie root (tests/platform/trixie.py); make test's second leg")


# The framework every controller of this session runs under: "ryu" (the venv's ryu-manager) or,
# with --os-ken-leg, "os-ken" (the launcher inside the trixie root).
EXPECTED_FRAMEWORK = "ryu"


def pytest_configure(config):
    # A CI timeout or `kill` sends SIGTERM, which would end pytest without fixture teardown
    # and leave the lab (OVS, Mininet, link daemons) behind; as an interrupt, teardown runs.
    from experiments.lab.net import teardown_on_sigterm

    teardown_on_sigterm()
    if config.getoption("--os-ken-leg"):
        _enter_os_ken_leg()


def _enter_os_ken_leg() -> None:
    """Point experiments.lab.net.Controller (every test's controller) at the launcher in the
    trixie root; build the root first, or stop the session saying why."""
    global EXPECTED_FRAMEWORK
    import sys

    from experiments.lab.net import CONTROLLER_ENV
    from tests.platform import trixie

    try:
        trixie.ensure()
    except trixie.ChrootUnavailable as e:
        raise pytest.UsageError(f"--os-ken-leg: {e}") from None
    os.environ[CONTROLLER_ENV] = shlex.join(
        [sys.executable, "-m", "tests.platform.trixie", "run", "--", f"{trixie.VENV}/bin/python",
         "-m", "ryu_app.launch"])
    EXPECTED_FRAMEWORK = "os-ken"


def pytest_report_header(config):
    return f"controller: {EXPECTED_FRAMEWORK}" + (" (trixie root, Python 3.13)"
                                                  if EXPECTED_FRAMEWORK == "os-ken" else "")


def lab_prerequisites_missing() -> str | None:
    if os.geteuid() != 0:
        return "lab tests need root (Mininet, OVS, namespaces)"
    missing = [t for t in LAB_TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)}: run `make setup`"
    return None


@pytest.fixture(scope="session")
def lab_ready():
    """Fail (not skip) when the lab cannot run: `make test` promises these tests run."""
    why = lab_prerequisites_missing()
    if why:
        pytest.fail(why)


@pytest.fixture(scope="session")
def private_ovs(lab_ready):
    """A private OVS for the whole session, under the lab lock; always torn down."""
    from ovs_config.lablock import lab_lock
    from ovs_config.private_ovs import PrivateOVS

    with lab_lock():
        ovs = PrivateOVS()
        try:
            yield ovs.start()
        finally:
            ovs.stop()

"""Shared fixtures. Lab fixtures hold the machine-wide lab lock while a lab exists."""

from __future__ import annotations

import os
import shutil

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB_TOOLS = ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl", "ovs-ofctl", "mn", "iperf3", "ethtool", "ip")


def pytest_configure(config):
    # A CI timeout or `kill` sends SIGTERM, which would end pytest without fixture teardown
    # and leave the lab (OVS, Mininet, link daemons) behind; as an interrupt, teardown runs.
    from experiments.lab.net import teardown_on_sigterm

    teardown_on_sigterm()


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

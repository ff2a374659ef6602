"""The ckcd-link lab tests' fixtures: two hosts in network namespaces joined through the daemon
(linklab.NetLab, one per test module, under the lab lock), and the daemons a test starts on it,
killed after the test. A daemon is given 50 Mbit/s and 10 ms one way unless the test says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from linklab import DELAY_MS, RATE_BPS, NetLab  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.link_daemon import LinkDaemon  # noqa: E402


@pytest.fixture(scope="module")
def lab():
    with lab_lock():
        lab = NetLab()
        try:
            lab.up()
            yield lab
        finally:
            lab.down()


@pytest.fixture
def daemon_factory(lab):
    started: list[LinkDaemon] = []

    def make(**kw) -> LinkDaemon:
        kw.setdefault("rate_bps", RATE_BPS)
        kw.setdefault("delay_ms", DELAY_MS)
        d = LinkDaemon(lab.if_la, lab.if_lb, netns=lab.ns_m, **kw)
        started.append(d)
        return d.start()

    try:
        yield make
    finally:
        for d in started:
            d.kill()
        lab.flush_tcp_metrics()

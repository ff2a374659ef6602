"""A lab that crashed (killed OVS, lost machine) can leave Mininet's switch-to-switch veths
in the root namespace. Mininet does not delete those before creating them again, so without
our cleanup every later lab on the machine fails with "RTNETLINK answers: File exists"."""

from __future__ import annotations

import os
import subprocess

from experiments.lab.net import Controller, mininet_net
from ovs_config.bottleneck import SwitchLink
from tests.waiting import eventually
from topologies.dumbbell import Dumbbell
import pytest

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

OF_PORT = 16653


def test_a_crashed_runs_leftover_bottleneck_veth_does_not_stop_the_next_lab(private_ovs, tmp_path):
    # What a crash leaves: the dumbbell's s1 - s2 link, both ends in the root namespace.
    subprocess.run(["ip", "link", "add", "s1-eth3", "type", "veth", "peer", "name", "s2-eth3"], check=True)
    try:
        ctl = Controller(of_port=OF_PORT, log_path=str(tmp_path / "ryu.log")).start()
        try:
            with mininet_net(Dumbbell(), ctl) as net:
                assert net.pingAll(timeout=2) == 0
        finally:
            ctl.stop()
        assert not os.path.exists("/sys/class/net/s1-eth3"), "the lab's own veth outlived net.stop()"
    finally:
        subprocess.run(["ip", "link", "del", "s1-eth3"], capture_output=True)


def test_a_crashed_runs_leftover_link_daemon_veth_does_not_stop_the_next_lab(private_ovs, tmp_path):
    # What a crash leaves of ovs_config.bottleneck: the switch-side veth s1-t9 and its peer t9-a.
    subprocess.run(["ip", "link", "add", "s1-t9", "type", "veth", "peer", "name", "t9-a"], check=True)
    try:
        ctl = Controller(of_port=OF_PORT, log_path=str(tmp_path / "ryu.log")).start()
        try:
            with mininet_net(Dumbbell(core_link=False), ctl) as net, \
                    SwitchLink("s1", 3, "s2", 3, rate_bps=50_000_000, delay_ms=1, name="t9"):
                eventually(lambda: net.pingAll(timeout=2) == 0, timeout_s=10,
                           what="pingall without loss once LLDP finds the link through the daemon")
        finally:
            ctl.stop()
        assert not os.path.exists("/sys/class/net/s1-t9"), "the link's own veth outlived SwitchLink.stop()"
    finally:
        subprocess.run(["ip", "link", "del", "s1-t9"], capture_output=True)

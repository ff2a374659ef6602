"""The topologies through Mininet's own command line, against `ryu-manager ckcd_coex` on its
default port: what README tells a user to type (`mn --custom topologies/<file>.py
--topo <name> --switch ovs,datapath=user --controller remote`)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from experiments.lab.net import RYU_DEFAULT_OF_PORT, RYU_DEFAULT_REST_PORT, Controller, _port_open

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# LLDP discovery must have found the topology's links before the first ping: the CLI waits for
# them on the controller's REST API, in mn's own Python (tests/waiting.py needs only the
# standard library), then runs pingall, as a user types both. The two lines come on mn's
# standard input, read once the network has started (mn's --pre script runs before it starts,
# when no switch can have connected). 20 s: the switches connect (OVS backs off up to 8 s
# between attempts) and one LLDP round (1 s) finds every link.
WAIT = ("py __import__('tests.waiting', fromlist=['eventually']).eventually(lambda: len(__import__('json').load("
        "__import__('urllib.request', fromlist=['urlopen']).urlopen("
        f"'http://127.0.0.1:{RYU_DEFAULT_REST_PORT}/coex/v1/state'))['links']) >= {{links}}, timeout_s=20, "
        "what='LLDP discovery of {links} links')\n")


@pytest.fixture
def default_controller(private_ovs, tmp_path):
    if _port_open(RYU_DEFAULT_OF_PORT):
        pytest.skip(f"port {RYU_DEFAULT_OF_PORT} is taken (a controller of the user's?): left alone")
    with Controller(of_port=RYU_DEFAULT_OF_PORT, log_path=str(tmp_path / "ryu.log"),
                    db_path=str(tmp_path / "policy.sqlite")) as ctl:
        yield ctl


@pytest.mark.parametrize("file,topo,links", [("dumbbell.py", "dumbbell", 1), ("two_paths.py", "twopaths", 4)])
def test_mn_custom_command_line_pings_everything(default_controller, file, topo, links):
    cmd = ["mn", "--custom", os.path.join(REPO, "topologies", file), "--topo", topo,
           "--switch", "ovs,datapath=user,protocols=OpenFlow13", "--controller", "remote,ip=127.0.0.1,port=6653"]
    done = None
    try:
        done = subprocess.run(cmd, input=WAIT.format(links=links) + "pingall\nexit\n", capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": REPO})  # for tests.waiting
    finally:
        if done is None or done.returncode != 0:  # mn stops its own net; clean only after a crash
            subprocess.run(["mn", "-c"], capture_output=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    dropped = re.search(r"Results: (\d+)% dropped \((\d+)/(\d+) received\)", out)
    assert dropped, out
    assert dropped.group(1) == "0" and dropped.group(2) == dropped.group(3), out
    assert "not true after" not in out, out  # the links were found before pingall
    assert "ckcd-coex controller loaded" in default_controller.log()

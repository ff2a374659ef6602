"""README's "Running the controller yourself" and "Running the controller with a policy", run as
written: the fenced blocks are read from README.md, never copied here, and run through
bash in an environment without the session's private-OVS variables, the way a user types them.

What the test adds to the user's typing, and why:
- the controller runs in the background (the README gives it a terminal of its own) and gets
  SIGINT, the README's Ctrl-C, by the PID of its process group;
- mn gets on its stdin, before the README's `mininet>` lines, one that waits until the controller
  has found the topology's links, as a user reading the CLI's prompt would before typing `pingall`
  (not a `--pre` script: mn runs that before the network starts, when no switch can connect);
- CKCD_COEX_DB points at the test's directory, so the user's stored policy (state/) is untouched.
Everything it started (controller, mn, the manual OVS) is stopped by PID if the README's own
stop commands did not; the lab lock is held while any of it exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import urllib.request

import pytest

from experiments.lab.net import RYU_DEFAULT_OF_PORT, RYU_DEFAULT_REST_PORT, _port_open, controller_command
from ovs_config.lablock import lab_lock
from ovs_config.private_ovs import MANUAL_RUN_DIR, PrivateOVS
from tests import conftest
from tests.waiting import eventually

pytestmark = pytest.mark.lab  # needs root, Open vSwitch and Mininet: the README's commands as written

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STATE_URL = f"http://127.0.0.1:{RYU_DEFAULT_REST_PORT}/coex/v1/state"
# The controller imports Ryu and opens both ports within a few seconds; 30 s for a loaded VM.
CONTROLLER_START_S = 30
# mn's whole session: build (~5 s), the switches connecting and LLDP (the wait takes up to 20 s),
# pingall (12 pings), iperf (the client's connect retries, 5 s of TCP), exit. Bounds a hang.
MN_SESSION_S = 150

# The first CLI line: wait, in mn's own Python, for the controller's LLDP discovery of every link.
WAIT_FOR_LINKS = """
import json, sys, urllib.request
sys.path.insert(0, {repo!r})
from tests.waiting import eventually  # standard library only: mn's Python has no pytest
links = lambda: len(json.load(urllib.request.urlopen({url!r}))["links"])
eventually(lambda: links() >= {links}, timeout_s=20, what="LLDP discovery of {links} link(s)")
"""


def readme_section(title: str) -> list[str]:
    """The fenced blocks of README.md's section `## title`, in order, as written."""
    text = open(os.path.join(REPO, "README.md")).read()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```[a-z]*\n(.*?)^```", section, flags=re.S | re.M)


def logical_lines(block: str) -> list[str]:
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def user_env(tmp_path) -> dict[str, str]:
    """The test's environment without the session's private OVS (a user's shell has none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVS_")}
    return {**env, "CKCD_COEX_DB": str(tmp_path / "policy.sqlite")}


class Background:
    """A README command that owns a terminal, run in a process group of its own; stop() is Ctrl-C."""

    def __init__(self, command: str, env: dict, log_path) -> None:
        self.log_path = log_path
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=REPO, env=env, start_new_session=True,
                                     stdout=open(log_path, "w"), stderr=subprocess.STDOUT)

    def log(self) -> str:
        return open(self.log_path).read()

    def stop(self) -> None:
        for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGKILL, 15)):
            if self.proc.poll() is not None:
                return
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass


README_LAUNCHER = ".venv/bin/ryu-manager"


def as_in_leg(line: str) -> str:
    """The README's controller line for this session's leg: as written under Ryu; under the
    os-ken leg with its launcher in place of README_LAUNCHER (ckcd-coex-controller takes
    ryu-manager's options and app, docs/controller.md), everything else on the line kept."""
    if conftest.EXPECTED_FRAMEWORK == "ryu":
        return line
    assert README_LAUNCHER in line, line
    return line.replace(README_LAUNCHER, shlex.join(controller_command()))


def start_controller(block: str, env: dict, tmp_path) -> Background:
    lines = [line for line in logical_lines(block) if "ryu-manager" in line]
    assert len(lines) == 1, f"expected one ryu-manager command in {block!r}"
    ctl = Background(as_in_leg(lines[0]), env, tmp_path / "ryu.log")
    try:
        eventually(lambda: ctl.proc.poll() is not None or (_port_open(RYU_DEFAULT_OF_PORT)
                                                           and _port_open(RYU_DEFAULT_REST_PORT)),
                   timeout_s=CONTROLLER_START_S, what="the README's controller listening")
        assert ctl.proc.poll() is None, f"the README's controller exited: {ctl.log()}"
    except BaseException:
        ctl.stop()
        raise
    return ctl


@pytest.fixture
def readme_lab(lab_ready):
    """The lab lock, the default controller ports free, and after the test nothing of the
    README's left: mn's leftovers and the manual OVS removed by their daemons' PIDs."""
    with lab_lock():
        for port in (RYU_DEFAULT_OF_PORT, RYU_DEFAULT_REST_PORT):
            if _port_open(port):
                pytest.skip(f"port {port} is taken (a controller of the user's?): left alone")
        manual = PrivateOVS(MANUAL_RUN_DIR)
        if manual.running():
            pytest.skip(f"a manual OVS runs in {MANUAL_RUN_DIR} (the user's own): left alone")
        try:
            yield
        finally:
            if manual.running():  # the README's stop did not run or did not work
                subprocess.run(["mn", "-c"], env={**os.environ, **manual.env()}, capture_output=True,
                               timeout=120)
                manual.stop(force=True)


def run_mn_session(session: str, cli: str, env: dict, tmp_path) -> str:
    """The README's OVS start and mn command in one bash, mn fed the wait for the links and then
    the README's CLI lines."""
    wait = tmp_path / "wait_for_links.py"
    wait.write_text(WAIT_FOR_LINKS.format(repo=REPO, url=STATE_URL, links=1))
    proc = subprocess.Popen(["bash", "-e", "-c", session], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(f"py exec(open({str(wait)!r}).read(), {{}})\n" + cli, timeout=MN_SESSION_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # bash and mn; the fixture's `mn -c` removes mn's net
        out, _ = proc.communicate()
        pytest.fail(f"the README's Mininet session did not end in {MN_SESSION_S} s (iperf hung: TCP does "
                    f"not pass?):\n{out}")
    assert proc.returncode == 0, out
    assert "not true after" not in out and "Error" not in out, out  # the wait ran, and found the links
    return out


def iperf_bps(out: str) -> list[float]:
    """Every iperf (2) report's bandwidth in bit/s: `[  1] 0.0000-5.0 sec  402 MBytes  674 Mbits/sec`."""
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
    return [float(v) * scale[p] for v, p in re.findall(r" sec +[\d.]+ [KMG]?Bytes +([\d.]+) ([KMG]?)bits/sec", out)]


def test_running_the_controller_yourself_as_written(readme_lab, tmp_path):
    blocks = readme_section("Running the controller yourself")
    session = next(b for b in blocks if "ckcd-coex ovs start" in b and "mn " in b)
    cli = "".join(line.removeprefix("mininet> ") + "\n" for b in blocks for line in b.splitlines()
                  if line.startswith("mininet> "))
    stop = next(b for b in blocks if "ckcd-coex ovs stop" in b)
    assert "iperf" in cli and "pingall" in cli, f"the README's Mininet CLI lines: {cli!r}"
    env = user_env(tmp_path)

    ctl = start_controller(next(b for b in blocks if "ryu-manager" in b), env, tmp_path)
    try:
        out = run_mn_session(session, cli, env, tmp_path)
    finally:
        ctl.stop()
    dropped = re.search(r"Results: (\d+)% dropped \((\d+)/(\d+) received\)", out)
    assert dropped and dropped.group(1) == "0" and dropped.group(2) == dropped.group(3), out
    # "It carries TCP": a report with any goodput at all (a TCP that does not pass gives none).
    assert iperf_bps(out) and min(iperf_bps(out)) > 0, out
    assert "ckcd-coex controller loaded" in ctl.log()

    stopped = subprocess.run(["bash", "-e", "-c", stop], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not PrivateOVS(MANUAL_RUN_DIR).running(), "the README's stop left the manual OVS running"


def test_running_the_controller_with_a_policy_as_written(readme_lab, tmp_path):
    (block,) = readme_section("Running the controller with a policy")
    env = user_env(tmp_path)
    ctl = start_controller(block, env, tmp_path)
    try:
        clients = "\n".join(line for line in logical_lines(block) if "ryu-manager" not in line)
        done = subprocess.run(["bash", "-e", "-c", clients], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{RYU_DEFAULT_REST_PORT}/coex/v1/policy") as answer:
            policy = json.load(answer)["policy"]
    finally:
        ctl.stop()
    assert [r["name"] for r in policy["rules"]] == ["bulk"], done.stdout
    assert policy["approaches"]["separate_paths"] is True, done.stdout

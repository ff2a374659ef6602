"""The pieces of a lab run, each a context manager that always cleans up.

    with lab_lock(), PrivateOVS() as ovs, Controller() as ctl, mininet_net(Dumbbell(), ctl) as net:
        net.pingAll()

Used by the tests, `ckcd-coex` and `make demo` alike.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial

from ovs_config.private_ovs import OVSError, remove_leftover_interface

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def teardown_on_sigterm() -> None:
    """Make SIGTERM (kill, a CI timeout) an interrupt, so the lab's context managers tear it
    down as on Ctrl-C instead of the process dying with OVS, Mininet and daemons left behind."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


CONTROLLER_ENV = "CKCD_COEX_CONTROLLER"


def _find(program: str) -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), program)
    return here if os.path.exists(here) else shutil.which(program)


def controller_command() -> list[str]:
    """The command that starts the controller: CKCD_COEX_CONTROLLER when set (a shell-quoted
    argv, e.g. a wrapper that runs it elsewhere; the tests' os-ken leg uses it), else
    `ryu-manager` where Ryu is installed, else our own launcher `ckcd-coex-controller`, which
    runs the app under os-ken (docs/controller.md, "Frameworks")."""
    wanted = os.environ.get(CONTROLLER_ENV, "").strip()
    if wanted:
        return shlex.split(wanted)
    for program in ("ryu-manager", "ckcd-coex-controller"):
        found = _find(program)
        if found:
            return [found]
    raise RuntimeError("neither ryu-manager nor ckcd-coex-controller found: run `make setup` "
                       "(it installs Ryu into .venv) or pip install ckcd-coex")


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


RYU_DEFAULT_OF_PORT, RYU_DEFAULT_REST_PORT = 6653, 8080


class Controller:
    """The real `ryu-manager ckcd_coex` as a child process (or, with `app`, another Ryu app such
    as `ryu.app.simple_switch_13` for comparisons: then no REST port is passed nor waited for)."""

    def __init__(self, of_port: int = 6653, log_path: str | None = None, extra_args=(),
                 rest_port: int = 8080, db_path: str | None = None, token: str | None = None,
                 app: str = "ckcd_coex"):
        self.app = app
        self.of_port = of_port
        self.rest_port = rest_port
        self.log_path = log_path or os.path.join(tempfile.gettempdir(), f"ckcd-coex-ryu-{of_port}.log")
        self.extra_args = list(extra_args)
        self.env = dict(os.environ)
        if db_path is not None:
            self.env["CKCD_COEX_DB"] = db_path
        if token is not None:
            self.env["CKCD_COEX_TOKEN"] = token
        self.proc: subprocess.Popen | None = None

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}/coex/v1"

    def _ports(self) -> tuple[int, ...]:
        """What the app listens on: only ckcd_coex serves the REST API."""
        return (self.of_port, self.rest_port) if self.app == "ckcd_coex" else (self.of_port,)

    def start(self, timeout_s: float = 20.0) -> "Controller":
        for port in self._ports():
            if _port_open(port):
                raise RuntimeError(f"something already listens on port {port}: "
                                   "another controller? stop it or choose another port")
        log = open(self.log_path, "a")
        # Ryu's own defaults are left to Ryu, so the plain `ryu-manager ckcd_coex` is what runs.
        ports = ([] if self.of_port == RYU_DEFAULT_OF_PORT else ["--ofp-tcp-listen-port", str(self.of_port)])
        if self.app == "ckcd_coex":
            ports += [] if self.rest_port == RYU_DEFAULT_REST_PORT else ["--wsapi-port", str(self.rest_port)]
        self.proc = subprocess.Popen(
            [*controller_command(), *ports, *self.extra_args, self.app],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, env=self.env)
        deadline = time.monotonic() + timeout_s
        while not all(_port_open(port) for port in self._ports()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"ryu-manager exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ryu-manager did not listen on {self.of_port} in {timeout_s:.0f} s")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """Die like a crashed controller: SIGKILL, no goodbye to the switches."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def __enter__(self) -> "Controller":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_switches_connected(names, timeout_s: float = 20.0) -> None:
    """Until every named bridge reports a connected controller."""
    deadline = time.monotonic() + timeout_s
    pending = list(names)
    while True:
        pending = [n for n in pending if not _bridge_connected(n)]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise OVSError(f"switches not connected to the controller after {timeout_s:.0f} s: {pending}")
        time.sleep(0.2)


def _bridge_connected(bridge: str) -> bool:
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "get", "bridge", bridge, "controller"],
                         capture_output=True, text=True).stdout.strip(" []\n")
    for uuid in filter(None, (u.strip() for u in out.split(","))):
        got = subprocess.run(["ovs-vsctl", "--timeout=5", "get", "controller", uuid, "is_connected"],
                             capture_output=True, text=True).stdout.strip()
        if got == "true":
            return True
    return False


def remove_stale_switch_interfaces(topo) -> list[str]:
    """Delete the switch-side interfaces (s1-eth3, ...) this topology is about to create if a
    crashed run left them: Mininet creates switch-to-switch veths without deleting old ones
    first, so one leftover fails every later build with "File exists"."""
    switches = set(topo.switches())
    names = set()
    for node1, node2, info in topo.links(withInfo=True):
        for node, port in ((node1, info.get("port1")), (node2, info.get("port2"))):
            if node in switches and port is not None:
                names.add(f"{node}-eth{port}")
    removed = [dev for dev in sorted(names) if remove_leftover_interface(dev)]
    if removed:
        print(f"lab: removed interfaces a crashed run left behind: {' '.join(removed)}", file=sys.stderr)
    return removed


@contextlib.contextmanager
def mininet_net(topo, controller: Controller, discovery_wait_s: float = 2.5):
    """A started Mininet on the private OVS (userspace datapath), offloads off, torn down always."""
    from mininet.clean import cleanup
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController

    from topologies import offloads_off

    if "OVS_RUNDIR" not in os.environ:
        raise OVSError("no private OVS in this process: start ovs_config.private_ovs.PrivateOVS first")
    setLogLevel(os.environ.get("CKCD_MININET_LOG", "warning"))
    net = Mininet(topo=topo, switch=partial(OVSSwitch, datapath="user", protocols="OpenFlow13"),
                  controller=partial(RemoteController, ip="127.0.0.1", port=controller.of_port),
                  autoSetMacs=True, waitConnected=False, build=False)
    remove_stale_switch_interfaces(topo)
    try:
        net.build()  # inside the try: a failed build still stops the nodes it made
        net.start()
        offloads_off(net)
        for host in net.hosts:
            host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv4.tcp_no_metrics_save=1")
        wait_switches_connected([s.name for s in net.switches])
        time.sleep(discovery_wait_s)  # LLDP runs every second; links expire after 3.5 s
        yield net
    finally:
        try:
            net.stop()
        except Exception as err:  # a half-built net still has to go
            print(f"mininet stop failed ({err}); cleaning up", file=sys.stderr)
            cleanup()


@contextlib.contextmanager
def controlled_net(topo, workdir: str, of_port: int = 6653, rest_port: int = 8080,
                   discovery_wait_s: float = 2.5):
    """The real controller (its policy in workdir) and a Mininet net under it; yields
    (net, controller, REST client). Needs the private OVS started; all torn down always."""
    from experiments.lab.rest_client import CoexClient

    ctl = Controller(of_port=of_port, rest_port=rest_port, log_path=os.path.join(workdir, "ryu.log"),
                     db_path=os.path.join(workdir, "policy.sqlite")).start()
    try:
        with mininet_net(topo, ctl, discovery_wait_s=discovery_wait_s) as net:
            yield net, ctl, CoexClient(ctl.rest_url)
    finally:
        ctl.stop()

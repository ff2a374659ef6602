"""ckcd-qdisc-agent against a private ovsdb-server holding hostile Interface rows.

The agent runs as root on a switch host and takes interface names from OVSDB, which others
write. These tests give it rows whose names try path traversal, word splitting, globbing, an
option, an embedded newline and a name too long for Linux, and check the rule of its
valid_name: only a name Linux accepts for a network device (1-15 of A-Z a-z 0-9 . _ -, not
"." or "..") is served; any other is skipped, logged once per agent process, and never
becomes a path, a tc argument or a second name.

No ovs-vswitchd runs (ovs_config.private_ovs.PrivateOVS always starts one, so it is not
used here): ovsdb-server alone, a child of the test stopped by its PID. Without vswitchd,
an ovs-vsctl that changes the database waits for it until its timeout, so the agent finds a
wrapper first on its PATH that adds --no-wait; every other argument is the agent's own.
`tc` is a recording stand-in (it succeeds, and says a ckcd qdisc runs once asked for one),
except in the last test, which runs the real tc inside a network namespace of its own.

CKCD_QDISC_AGENT=PATH runs the tests against another copy of the agent (an older one).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from ovs_config.ovsdb import _datum
from ovs_config.private_ovs import OVS_SCHEMA
from tests.conftest import REPO
from tests.waiting import eventually

AGENT = os.environ.get("CKCD_QDISC_AGENT") or os.path.join(REPO, "datapath", "kernel", "ckcd-qdisc-agent")
SPEC = "droptail limit=16"
GOOD = ("qa0", "-n")  # "-n" is a name Linux accepts: served, and must never be read as an option


def bad_names(tmp: str) -> list[str]:
    """Names the agent must skip; tmp holds the victim files, tmp/state is the state dir."""
    return [
        "../victim",                                  # $STATE/../victim: a file beside the state dir
        f"../../{os.path.basename(tmp)}/victim",      # the same file by another way
        "../" * 16 + tmp.lstrip("/") + "/victim2",    # through /, to a file that does not exist
        ".", "..",
        "x y",                                        # two words if split
        "*",                                          # every file of the directory if globbed
        "nl0\nnl1",                                   # two valid names if read line by line
        "abcdefghijklmnop",                           # 16 characters: Linux takes at most 15
        'q"\\z',                                      # a quote and a backslash
        "eth0:1",                                     # an alias label, not a device
    ]


def shown(name: str) -> str:
    """A skipped Interface name as the agent logs it: the JSON string OVSDB prints."""
    return json.dumps(name)


# --- a private ovsdb-server ---------------------------------------------------------------------

class Db:
    def __init__(self, sock: str):
        self.sock = sock
        self.remote = f"unix:{sock}"

    def vsctl(self, *args: str) -> str:
        out = subprocess.run(["ovs-vsctl", f"--db={self.remote}", "--no-wait", "--timeout=10", *args],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, f"ovs-vsctl {args}: {out.stderr}"
        return out.stdout

    def add_port(self, name: str, **ids: str) -> None:
        sets = [f"external_ids:{k}={json.dumps(v)}" for k, v in ids.items()]
        self.vsctl("add-port", "br0", name, "--", "set", "Interface", name, *sets)

    def interfaces(self) -> dict[str, dict]:
        """Every Interface row's external_ids, by name."""
        out = json.loads(self.vsctl("--format=json", "--columns=name,external_ids", "list", "Interface"))
        return {row[0]: _datum(row[1]) for row in out["data"]}

    def agent_key(self) -> dict:
        out = json.loads(self.vsctl("--format=json", "--columns=external_ids", "list", "Open_vSwitch"))
        return _datum(out["data"][0][0])


@pytest.fixture
def db():
    for tool in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: run `make setup` (installs openvswitch-switch)")
    d = tempfile.mkdtemp(prefix="ckcdqa")  # short: a unix socket's path has at most 107 bytes
    try:
        subprocess.run(["ovsdb-tool", "create", f"{d}/conf.db", OVS_SCHEMA], check=True, capture_output=True)
        with open(f"{d}/ovsdb-server.log", "w") as log:
            server = subprocess.Popen(["ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
                                       f"--unixctl={d}/ovsdb-server.ctl", "--no-chdir"],
                                      stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            eventually(lambda: os.path.exists(f"{d}/db.sock"), timeout_s=10, what="ovsdb-server listens")
            ovsdb = Db(f"{d}/db.sock")
            ovsdb.vsctl("init")
            ovsdb.vsctl("add-br", "br0")
            yield ovsdb
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- the agent's surroundings -------------------------------------------------------------------

FAKE_TC = r"""#!/bin/sh
# Records each call (arguments separated by \037, calls by \036); succeeds. `qdisc show`
# reports a ckcd qdisc once one was asked for on that device, `-s -j` prints an empty list.
{ for a in "$@"; do printf '%s\037' "$a"; done; printf '\036'; } >> "$FAKE_TC_LOG"
case $1 in -s) echo '[]'; exit 0 ;; esac
if [ "$1 $2" = "qdisc show" ]; then
    tr '\036' '\n' < "$FAKE_TC_LOG" | grep -qF -- "$(printf 'qdisc\037replace\037dev\037%s\037root\037' "$4")" &&
        echo "qdisc ckcd 8001: root refcnt 2"
fi
exit 0
"""

NO_WAIT_VSCTL = """#!/bin/sh
# No ovs-vswitchd in these tests: do not wait for it to apply a change.
exec {vsctl} --no-wait "$@"
"""


class Setup:
    """tmp/: victim (outside the state dir), state/ (the agent's), tools/ (PATH, tc's log)."""

    def __init__(self, tmp: str, db: Db):
        self.tmp, self.db = tmp, db
        self.state = os.path.join(tmp, "state")
        self.tools = os.path.join(tmp, "tools")
        self.tc_log = os.path.join(self.tools, "tc.log")
        os.makedirs(self.state)
        os.makedirs(self.tools)
        with open(os.path.join(tmp, "victim"), "w") as f:
            f.write("precious\n")
        for name, text in (("tc", FAKE_TC), ("ovs-vsctl", NO_WAIT_VSCTL.format(vsctl=shutil.which("ovs-vsctl")))):
            with open(os.path.join(self.tools, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(self.tools, name), 0o755)
        open(self.tc_log, "w").close()
        # State the agent left before: a hidden name (a port no longer managed: released), and
        # files whose names are no valid names, a glob and two lines (skipped, logged, kept).
        for name, text in ((".qa1", "root||droptail"), ("*", "root||droptail"), ("st\nx", "root||droptail")):
            with open(os.path.join(self.state, name), "w") as f:
                f.write(text)
        for name in GOOD + tuple(bad_names(tmp)):
            db.add_port(name, **{"ckcd-qdisc-managed": "true", "ckcd-qdisc": SPEC})
        self.outside = self.snapshot()

    def env(self, tc: str | None = None) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.tools}:{os.environ['PATH']}", "TC": tc or f"{self.tools}/tc",
                "FAKE_TC_LOG": self.tc_log, "CKCD_QDISC_AGENT_STATE": self.state}

    def snapshot(self) -> dict[str, str]:
        """Every file under tmp outside the state dir and tools/, with its content."""
        files = {}
        for root, dirs, names in os.walk(self.tmp):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in (self.state, self.tools)]
            for n in names:
                with open(os.path.join(root, n), errors="replace") as f:
                    files[os.path.relpath(os.path.join(root, n), self.tmp)] = f.read()
        return files

    def tc_calls(self) -> list[list[str]]:
        with open(self.tc_log) as f:
            return [c.split("\037")[:-1] for c in f.read().split("\036")[:-1]]

    def tc_devices(self) -> set[str]:
        return {c[c.index("dev") + 1] for c in self.tc_calls() if "dev" in c}

    def run(self, shell: str, *args: str, prefix: tuple[str, ...] = (), tc: str | None = None):
        return subprocess.run([*prefix, *shell.split(), AGENT, "--db", self.db.remote, *args],
                              env=self.env(tc), cwd=self.tmp, capture_output=True, text=True, timeout=120)

    def assert_nothing_outside_touched(self) -> None:
        assert self.snapshot() == self.outside
        with open(os.path.join(self.tmp, "victim")) as f:
            assert f.read() == "precious\n"
        assert not os.path.exists(os.path.join(self.tmp, "victim2"))


def skip_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "skipping" in line]


def assert_each_bad_name_logged_once(stderr: str, tmp: str) -> None:
    lines = skip_lines(stderr)
    for name in bad_names(tmp):
        assert len([line for line in lines if f"Interface {shown(name)}:" in line]) == 1, (name, stderr)
    for name in ('"*"', '"st?x"'):  # a state file's name, a control character shown as "?"
        assert len([line for line in lines if f"state file {name}:" in line]) == 1, (name, stderr)
    assert len(lines) == len(bad_names(tmp)) + 2, stderr  # and nothing else (not "-n", not ".qa1")


def assert_only_agent_lines(stderr: str) -> None:
    """Every line on stderr is the agent's own: no shell error, no tc or ovs-vsctl complaint."""
    assert all(line.startswith("ckcd-qdisc-agent: ") for line in stderr.splitlines()), stderr


SHELLS = ["sh"] + (["busybox sh"] if shutil.which("busybox") else [])  # Debian's dash; the kernel lab's


@pytest.fixture
def setup(tmp_path, db):
    return Setup(str(tmp_path), db)


# --- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_interface_names_are_skipped_and_never_become_paths(setup, shell):
    """Rule (valid_name: only a Linux netdevice name, 1-15 of A-Z a-z 0-9 . _ -, not . or ..):
    rows named ../victim (and other traversals), ".", "..", "x y", "*", "nl0<newline>nl1", 16
    characters, a quote, an alias label: no file outside the state dir is deleted, changed or
    created (the victim, pre-created where the traversal points, keeps its content); tc never
    sees any of them, nor the two halves of the newline name; their rows get no answer; each is
    logged once. The well-named rows, "-n" among them, are served: tc ran for them, their state
    file exists, their row says applied. A hidden state file of a port no longer managed is
    found and released; a state file with a bad name is left alone."""
    s = setup
    r = s.run(shell, "--once")
    assert r.returncode == 0, r.stderr
    s.assert_nothing_outside_touched()
    assert s.tc_devices() == {"qa0", "-n", ".qa1"}, s.tc_calls()
    assert ["qdisc", "replace", "dev", "-n", "root", "ckcd", "spec", SPEC] in s.tc_calls()
    assert sorted(os.listdir(s.state)) == sorted(["qa0", "-n", "*", "st\nx"])
    with open(os.path.join(s.state, "*")) as f:
        assert f.read() == "root||droptail"
    rows = s.db.interfaces()
    for name in GOOD:
        assert rows[name].get("ckcd-qdisc-applied") == SPEC, rows[name]
    for name in bad_names(s.tmp):
        assert not {k for k in rows[name] if k in ("ckcd-qdisc-applied", "ckcd-qdisc-error",
                                                   "ckcd-qdisc-stats")}, (name, rows[name])
    assert_each_bad_name_logged_once(r.stderr, s.tmp)
    assert_only_agent_lines(r.stderr)
    assert ".qa1: released" in r.stderr


def test_a_second_once_run_logs_again_and_still_touches_nothing(setup):
    """Rule (a bad name is logged once per agent process): `--once` twice is two processes, so
    each bad name is logged once by each; the second round changes nothing outside the state
    dir either and re-applies nothing (the served ports' state is unchanged)."""
    s = setup
    first = s.run("sh", "--once")
    calls = len(s.tc_calls())
    second = s.run("sh", "--once")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert_each_bad_name_logged_once(second.stderr, s.tmp)
    s.assert_nothing_outside_touched()
    replaced = [c for c in s.tc_calls()[calls:] if c[:2] == ["qdisc", "replace"]]
    assert replaced == [], replaced


@pytest.mark.parametrize("shell", SHELLS)
def test_a_running_agent_logs_each_bad_name_once_across_rounds(setup, shell):
    """Rule (a bad name is logged once per agent process, not every round): the agent runs
    rounds every 0.2 s until tc's stats call for qa0 shows at least four rounds; each bad name
    is in its log exactly once. SIGTERM then ends it and removes its Open_vSwitch key."""
    s = setup
    proc = subprocess.Popen([*shell.split(), AGENT, "--db", s.db.remote, "--interval", "0.2"], env=s.env(),
                            cwd=s.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: sum(1 for c in s.tc_calls() if c[:2] == ["-s", "-j"] and c[-1] == "qa0") >= 4,
                   timeout_s=60, what="four rounds of the agent")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert_each_bad_name_logged_once(stderr, s.tmp)
    assert_only_agent_lines(stderr)
    s.assert_nothing_outside_touched()
    assert "ckcd-qdisc-agent" not in s.db.agent_key()


def test_the_well_named_port_is_served_by_the_real_tc(setup):
    """Rule (valid_name lets a real device through): with the real tc, in a network namespace
    of the test's own holding a veth qa0, the agent among the hostile rows still tries qa0 and
    answers with tc's refusal in ckcd-qdisc-error (no ckcd qdisc here: tc finds no q_ckcd.so
    in an empty TC_LIB_DIR); nothing outside the state dir changes."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs root, ip and tc (a network namespace of its own)")
    s = setup
    ns = f"ckcdqa{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "qa0", "type", "veth", "peer", "name", "qa1"],
                       check=True, capture_output=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "qa0", "up"], check=True, capture_output=True)
        os.makedirs(os.path.join(s.tools, "tclib"))
        env_args = (f"TC_LIB_DIR={s.tools}/tclib",)
        r = s.run("sh", "--once", prefix=("ip", "netns", "exec", ns, "env", *env_args), tc=shutil.which("tc"))
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert r.returncode == 0, r.stderr
    error = s.db.interfaces()["qa0"].get("ckcd-qdisc-error", "")
    assert "ckcd" in error, (error, r.stderr)
    assert "qa0: refused:" in r.stderr
    s.assert_nothing_outside_touched()
    assert_each_bad_name_logged_once(r.stderr, s.tmp)


# --- the systemd unit ---------------------------------------------------------------------------

UNIT = os.path.join(REPO, "datapath", "kernel", "ckcd-qdisc-agent.service")
DOCS = os.path.join(REPO, "docs", "real-switches.md")


def read_unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=True)
    unit.optionxform = str  # systemd's keys are case-sensitive
    with open(UNIT) as f:
        unit.read_file(f)
    return unit


def test_the_unit_runs_the_agent_where_the_docs_install_it():
    """Rule (the operator's install, docs/real-switches.md): the unit's ExecStart is the path the
    docs' `install -m 0755 datapath/kernel/ckcd-qdisc-agent DIR/` puts the agent at, and the docs
    install the unit itself; it needs Debian's ovsdb-server, restarts on failure, keeps tc's
    capability and the agent's default state directory writable."""
    with open(DOCS) as f:
        docs = f.read()
    m = re.search(r"install -m 0755 datapath/kernel/ckcd-qdisc-agent (/\S+)", docs)
    assert m, "docs/real-switches.md installs the agent with install -m 0755"
    installed = m.group(1) + "ckcd-qdisc-agent" if m.group(1).endswith("/") else m.group(1)
    assert "install -m 0644 datapath/kernel/ckcd-qdisc-agent.service /etc/systemd/system/" in docs
    unit = read_unit()
    svc = unit["Service"]
    assert svc["ExecStart"].split()[0] == installed, svc["ExecStart"]
    assert "ovsdb-server.service" in unit["Unit"]["Requires"].split()
    assert {"ovsdb-server.service", "openvswitch-switch.service"} <= set(unit["Unit"]["After"].split())
    assert svc["Restart"] == "on-failure"
    assert "CAP_NET_ADMIN" in svc["CapabilityBoundingSet"].split()
    with open(AGENT) as f:
        default_state = re.search(r"^STATE=\$\{CKCD_QDISC_AGENT_STATE:-(\S+)\}$", f.read(), re.M).group(1)
    assert svc["ProtectSystem"] == "strict" and default_state in svc["ReadWritePaths"].split()
    assert f"/run/{svc['RuntimeDirectory']}" == default_state
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_systemd_analyze_verifies_the_unit(tmp_path):
    """Rule (the unit is one systemd accepts): `systemd-analyze verify` finds nothing, with
    ExecStart pointed at the repository's agent (the installed path does not exist here)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    with open(UNIT) as f:
        text = f.read()
    copy = tmp_path / "ckcd-qdisc-agent.service"
    agent = os.path.join(REPO, "datapath", "kernel", "ckcd-qdisc-agent")
    copy.write_text(re.sub(r"^ExecStart=\S+", f"ExecStart={agent}", text, flags=re.M))
    out = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stdout + out.stderr

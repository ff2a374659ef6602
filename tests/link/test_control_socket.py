"""ckcd-link's control socket under misuse (docs/ckcd-link.md): a client that never reads
its replies is disconnected at a bound instead of growing the daemon without limit, and
set_link is all or nothing and says the range it enforces. The daemon runs on a veth
pair in a network namespace of its own; no traffic is needed. Each test runs against the
plain build and the ASan + UBSan build (`make -C datapath sanitize`), which must then exit
0 on SIGTERM without a sanitizer report (memory error, leak, undefined behaviour)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.link_daemon import DEFAULT_BINARY, LinkDaemon, LinkDaemonError  # noqa: E402

pytestmark = [
    pytest.mark.lab,  # needs root: ckcd-link on veths in network namespaces
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not DEFAULT_BINARY.exists(), reason="make -C datapath first"),
]

# datapath/link/control.c MAX_UNREAD_REPLY_BYTES
UNREAD_BOUND_BYTES = 8 << 20
SANITIZED_BINARY = REPO / "datapath" / "build-san" / "ckcd-link"


@pytest.fixture(scope="module")
def veth_ns():
    ns = f"ckcdctl{os.getpid()}"
    with lab_lock():
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            subprocess.run(["ip", "-n", ns, "link", "add", "ctla", "type", "veth", "peer", "name", "ctlb"],
                           check=True)
            for dev in ("ctla", "ctlb"):
                subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
            yield ns
        finally:
            subprocess.run(["ip", "netns", "del", ns], check=False)


@pytest.fixture(params=["plain", "asan+ubsan"])
def daemon(request, veth_ns, monkeypatch):
    binary = DEFAULT_BINARY
    if request.param == "asan+ubsan":
        subprocess.run(["make", "-s", "-C", str(REPO / "datapath"), "sanitize"], check=True,
                       capture_output=True, timeout=600)
        binary = SANITIZED_BINARY
        monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:exitcode=86")
        monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    d = LinkDaemon("ctla", "ctlb", netns=veth_ns, rate_bps=50_000_000, delay_ms=10,
                   qdisc="ckcd limit=80 qmin=30", qdisc_ba="droptail limit=100", binary=str(binary))
    d.sanitized = request.param != "plain"
    d.start()
    try:
        yield d
        proc = d.proc
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        stderr = d.stderr()
        assert code == 0 and "Sanitizer" not in stderr and "runtime error" not in stderr, stderr[-4000:]
    finally:
        d.kill()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_a_client_that_never_reads_is_disconnected_at_the_bound(daemon):
    # Before the bound, 53 400 unread `stats` replies took the daemon from 102 to 259 MiB.
    before = rss_bytes(daemon.pid)
    request = b'{"cmd": "stats", "max_flows": 4096}\n'
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(daemon.control_path)
        try:
            for _ in range(100_000):
                s.sendall(request)
                sent += 1
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon closed us: what this test wants
    assert sent < 100_000, "the daemon kept reading a client that reads nothing"
    show = daemon.show()  # and it still answers everyone else
    assert show["control"]["clients_dropped_unread"] == 1
    # The bound plus the one reply that crossed it, and slack for the allocator's arenas
    # (not under ASan, whose quarantine holds freed memory on purpose).
    grown = rss_bytes(daemon.pid) - before
    if not daemon.sanitized:
        assert grown < 2 * UNREAD_BOUND_BYTES + (8 << 20), f"RSS grew by {grown / 2**20:.1f} MiB"
    assert "unread" in daemon.stderr()


def test_set_link_is_all_or_nothing(daemon):
    # 1 Mbit/s x 20 ms is 2 packets: CKCD's q_max = 3 BDP falls below its spec's qmin=30, so
    # direction ab refuses while ba (droptail, no rate parameter) would take it: neither changes.
    with pytest.raises(LinkDaemonError) as e:
        daemon.set_link(rate_bps=1_000_000, delay_ms=3)
    assert e.value.param == "rate_bps"
    dirs = daemon.show()["dirs"]
    assert [dirs[d]["rate_bps"] for d in ("ab", "ba")] == [50_000_000, 50_000_000]
    assert [dirs[d]["delay_ms"] for d in ("ab", "ba")] == [10, 10]


def test_set_link_says_the_delay_range_it_enforces(daemon):
    reply = daemon.request_raw('{"cmd": "set_link", "delay_ms": 10000.5}')
    assert reply["ok"] is False and reply["param"] == "delay_ms"
    assert "0..10000" in reply["error"]
    assert daemon.set_link(delay_ms=10000)["dirs"]["ab"]["delay_ms"] == 10000

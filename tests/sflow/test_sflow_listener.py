"""ryu_app.sflow_listener: the UDP socket that feeds the collector, in a thread, in a
caller-driven loop and under eventlet."""

from __future__ import annotations

import os
import socket
import time

import pytest

import sflowgen as g
from coex.sflow_collector import SFlowCollector
from ryu_app.sflow_listener import SFlowListener

REAL = g.captured()


def test_listener_receives_over_udp_in_a_thread():
    col = SFlowCollector()
    got = []
    col.subscribe_flow_samples(lambda s, dg, now: got.append(now))
    with SFlowListener(col, port=0, clock=lambda: 123.0, poll_timeout_s=0.05) as lst:
        host, port = lst.address
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for d in REAL + [b"garbage!"]:
                tx.sendto(d, (host, port))
        deadline = time.monotonic() + 5
        while col.stats()["datagrams_ok"] + col.stats()["datagrams_malformed"] < 7:
            assert time.monotonic() < deadline, col.stats()
            time.sleep(0.01)
        st = lst.stats()
    assert st["datagrams_ok"] == 6 and st["malformed_by_reason"]["unsupported_version"] == 1
    assert got == [123.0] * 24 and st["receive_errors"] == 0


def test_listener_receive_once_for_a_caller_driven_loop():
    col = SFlowCollector()
    lst = SFlowListener(col, port=0, poll_timeout_s=0.05).open()
    try:
        assert lst.receive_once() is False  # nothing there: returns after the timeout
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.sendto(REAL[0], lst.address)
        assert lst.receive_once() is True
        assert col.stats()["datagrams_ok"] == 1
    finally:
        lst.stop()


def test_listener_validates_port():
    with pytest.raises(ValueError, match="port"):
        SFlowListener(SFlowCollector(), port=70000)
    with pytest.raises(ValueError, match="poll_timeout_s"):
        SFlowListener(SFlowCollector(), poll_timeout_s=0)


def test_listener_stopped_under_eventlet_while_receiving_returns_quietly():
    """In ryu-manager a green thread waits in receive_once() when the controller restarts
    detection: stop() closes the socket and a new listener takes the same port (and the
    descriptor); eventlet then raises EOFError in the waiting thread, which used to escape
    as a traceback in the controller's log. Run in a child: eventlet patches the process."""
    import subprocess
    import sys
    script = """
from ryu.lib import hub
hub.patch(thread=False)
from coex.sflow_collector import SFlowCollector
from ryu_app.sflow_listener import SFlowListener
old = SFlowListener(SFlowCollector(), host="127.0.0.1", port=0, poll_timeout_s=0.5).open()
port = old.address[1]
out = {}
def serve():
    try:
        out["result"] = old.receive_once()
    except BaseException as err:
        out["result"] = repr(err)
hub.spawn(serve)
hub.sleep(0.1)
old.stop()
new = SFlowListener(SFlowCollector(), host="127.0.0.1", port=port, poll_timeout_s=0.5).open()
hub.sleep(0.7)
new.stop()
print(out)
"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=root)
    assert res.stdout.strip() == "{'result': False}", res.stdout + res.stderr

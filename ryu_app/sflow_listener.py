"""The UDP socket that feeds the embedded sFlow collector (coex.sflow_collector).

I/O lives here, beside the controller that runs it, so that coex stays pure.
``receive_once()`` processes at most one datagram, ``serve_forever()`` loops until
``stop()``, ``start()`` runs that loop in a daemon thread. Under eventlet (ryu-manager) call
``receive_once()`` from a green thread instead of ``start()``: the socket module is green
there, and the loop blocks only in recvfrom with a timeout.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable, Optional

from coex.sflow_collector import SFlowCollector

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6343


class SFlowListener:
    """A UDP socket feeding an SFlowCollector.

    ``clock`` gives the ``now`` handed to the collector (default time.monotonic).
    Port 0 binds an ephemeral port; ``address`` tells which one after ``open()``.
    """

    def __init__(self, collector: SFlowCollector, host: str = DEFAULT_HOST,
                 port: int = DEFAULT_PORT, clock: Callable[[], float] = time.monotonic,
                 recv_buffer_bytes: int = 4 << 20, poll_timeout_s: float = 0.2):
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        if poll_timeout_s <= 0:
            raise ValueError(f"poll_timeout_s must be > 0, got {poll_timeout_s!r}")
        self.collector = collector
        self.host, self.port = host, port
        self.clock = clock
        self.recv_buffer_bytes = recv_buffer_bytes
        self.poll_timeout_s = poll_timeout_s
        self._sock: Optional[socket.socket] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.receive_errors = 0

    def open(self) -> "SFlowListener":
        if self._sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_DGRAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.recv_buffer_bytes)
                sock.bind((self.host, self.port))
            except OSError:
                sock.close()
                raise
            sock.settimeout(self.poll_timeout_s)
            self._sock = sock
        return self

    @property
    def address(self) -> tuple[str, int]:
        if self._sock is None:
            raise RuntimeError("listener not open")
        return self._sock.getsockname()[:2]

    def receive_once(self) -> bool:
        """Wait up to poll_timeout_s for one datagram and process it. True if one came."""
        if self._sock is None:
            self.open()
        try:
            data, peer = self._sock.recvfrom(65535)
        except socket.timeout:
            return False
        except (OSError, EOFError):
            # EOFError: eventlet's answer to a socket closed by stop() under a green thread
            # waiting on it, once another socket has taken its descriptor (a restart)
            if self._stop.is_set():
                return False
            self.receive_errors += 1
            return False
        self.collector.handle_datagram(data, self.clock(), peer[0])
        return True

    def serve_forever(self) -> None:
        """Receive until stop(). Usable as a thread target or an eventlet green thread."""
        self.open()
        while not self._stop.is_set():
            self.receive_once()

    def start(self) -> "SFlowListener":
        """serve_forever() in a daemon thread."""
        self.open()
        self._stop.clear()
        self._thread = threading.Thread(target=self.serve_forever, name="sflow-listener",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.poll_timeout_s + 1.0)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def stats(self) -> dict:
        st = self.collector.stats()
        st["receive_errors"] = self.receive_errors
        return st

    def __enter__(self) -> "SFlowListener":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

"""A stand-in for sFlow-RT's REST API (and its sFlow port), for tests.

sFlow-RT cannot be installed on our machines (it is on no registry we reach), so the tests
that exercise our sFlow-RT backend talk to this stub instead. It answers with bodies in the
format sFlow-RT documents (sflow-rt.com/reference.php, REST API table, and
sflow-rt.com/define_flow.php, "Defining Flows"):

    PUT    /flow/{name}/json    a flow definition {"keys", "value", ...}: stored, 204
    DELETE /flow/{name}/json    204
    GET    /flow/{name}/json    the stored definition, 404 if none
    GET    /activeflows/{agent}/{name}/json?maxFlows=&minValue=&aggMode=
                                a JSON array of {"key", "value", "agent", "dataSource"}:
                                "key" joins the values of the definition's keys with commas,
                                "value" is per second (bytes/s for value "bytes"), largest
                                first. 404 for an undefined flow, as sFlow-RT does not know it.
    GET    /version             a version string

The bodies are what the test sets with set_active_flows(); nothing is computed from traffic.
Optionally the stub also binds a UDP socket where an sFlow agent can be pointed (sFlow-RT
receives sFlow on UDP 6343 by default) and counts the datagrams that arrive, so a test can
check that the switch really sends to "sFlow-RT".
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.parse


class StubSFlowRT:
    VERSION = "3.0-1688"

    def __init__(self, host: str = "127.0.0.1", http_port: int = 0, sflow_port: int | None = None):
        self.requests: list = []          # (method, path, body or None), in order
        self.flows: dict[str, dict] = {}  # name -> definition as PUT
        self.datagrams = 0                # sFlow datagrams received on the UDP port
        self.datagram_sources: set = set()
        self._active: list = []
        self._lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code: int, body: str = ""):
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _flow_name(self):
                parts = urllib.parse.urlsplit(self.path).path.split("/")
                # /flow/{name}/json or /activeflows/{agent}/{name}/json
                if len(parts) == 4 and parts[1] == "flow" and parts[3] == "json":
                    return parts[2]
                if len(parts) == 5 and parts[1] == "activeflows" and parts[4] == "json":
                    return parts[3]
                return None

            def do_PUT(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"null")
                stub._note("PUT", self.path, body)
                name = self._flow_name()
                if self.path.startswith("/flow/") and name:
                    with stub._lock:
                        stub.flows[name] = body
                    self._answer(204)
                else:
                    self._answer(404)

            def do_DELETE(self):
                stub._note("DELETE", self.path, None)
                with stub._lock:
                    stub.flows.pop(self._flow_name() or "", None)
                self._answer(204)

            def do_GET(self):
                stub._note("GET", self.path, None)
                name = self._flow_name()
                if self.path == "/version":
                    self._answer(200, stub.VERSION)
                elif self.path.startswith("/activeflows/") and name:
                    with stub._lock:
                        known, body = name in stub.flows, json.dumps(stub._active)
                    self._answer(200, body) if known else self._answer(404)
                elif self.path.startswith("/flow/") and name in stub.flows:
                    self._answer(200, json.dumps(stub.flows[name]))
                else:
                    self._answer(404)

        self._server = http.server.ThreadingHTTPServer((host, http_port), Handler)
        self._threads = [threading.Thread(target=self._server.serve_forever, daemon=True)]
        self._udp = None
        if sflow_port is not None:
            self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._udp.bind((host, sflow_port))
            self._udp.settimeout(0.2)
            self._stopping = threading.Event()
            self._threads.append(threading.Thread(target=self._receive, daemon=True))

    # -- what the test uses
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def sflow_address(self) -> str | None:
        if self._udp is None:
            return None
        host, port = self._udp.getsockname()[:2]
        return f"{host}:{port}"

    def set_active_flows(self, entries: list) -> None:
        """What GET /activeflows answers from now on (a list of documented entries)."""
        with self._lock:
            self._active = sorted(entries, key=lambda e: e.get("value", 0), reverse=True)

    def paths(self, method: str | None = None) -> list:
        with self._lock:
            return [p for m, p, _ in self.requests if method is None or m == method]

    def start(self) -> "StubSFlowRT":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._udp is not None:
            self._stopping.set()
        for t in self._threads:
            t.join(timeout=2)
        if self._udp is not None:
            self._udp.close()

    def __enter__(self) -> "StubSFlowRT":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- internals
    def _note(self, method: str, path: str, body) -> None:
        with self._lock:
            self.requests.append((method, path, body))

    def _receive(self) -> None:
        while not self._stopping.is_set():
            try:
                _, source = self._udp.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.datagrams += 1
                self.datagram_sources.add(source[0])


def active_flow_entry(key_values: list, value: float, agent: str = "127.0.0.1",
                      data_source: str = "2.1000") -> dict:
    """One entry of GET /activeflows as documented. data_source: the documentation shows
    ifIndex data sources ("2", "4"); OVS's flow samples come from the bridge, not a port
    (data source type 2, index 1000 in tests/fixtures/sflow), and we found no documented
    example of how sFlow-RT writes that one, so the default "2.1000" (type.index) is our
    guess. Our backend does not read it: ports come from the "outputifindex" key."""
    return {"key": ",".join(str(v) for v in key_values), "value": value, "agent": agent,
            "dataSource": data_source}

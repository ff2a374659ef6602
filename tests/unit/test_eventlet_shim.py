"""The eventlet shim (ryu_app/eventlet_shim.py), in a fresh interpreter of the venv, where the
.pth that scripts/setup.sh writes arms it at start, as in ryu-manager and in our tests."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# http.server imported first (a test helper), Ryu (and eventlet's green http) after it, then
# the package attribute used: before the shim mended inject(), http.server here was eventlet's
# green copy and shutdown() waited forever on a green lock the server thread could not wake.
SCRIPT = """
import sys, threading
import http.server
import ryu.app.wsgi
import http
assert http.server is sys.modules["http.server"], "http.server is eventlet's copy"
assert http.client is sys.modules["http.client"], "http.client is eventlet's copy"
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
server.shutdown()
server.server_close()
print("ok", ryu.app.wsgi.__name__)
"""


def test_green_http_copies_do_not_leak_into_an_unpatched_process():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "ok ryu.app.wsgi", done.stdout + done.stderr

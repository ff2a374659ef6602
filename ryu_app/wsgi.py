"""A small WSGI routing layer for os-ken, which has none (Ryu's `ryu.app.wsgi` went in os-ken 2.0).

It offers what ryu_app/rest.py uses of Ryu's: `route` marks a controller method with a path
template, `ControllerBase` is what a controller class derives from, and `WSGIApplication` is the
app context a RyuApp/OSKenApp asks for in `_CONTEXTS` and registers controller classes with; the
launcher (ryu_app/launch.py) serves it with os-ken's eventlet WSGI server on --wsapi-host and
--wsapi-port. Under Ryu none of this is used: ryu_app/framework.py takes Ryu's own.

A path template is the path with `{name}` (one path segment) or `{name:regex}` parts; a route's
`requirements` may give a part's regex instead. A request whose path matches no route gets a JSON
404, one whose method a matching route does not take a JSON 405; an exception out of a controller
a JSON 500 (never a traceback, which eventlet's server would otherwise send).
"""

from __future__ import annotations

import json
import logging
import re

import webob
import webob.exc

LOG = logging.getLogger(__name__)
_PART = re.compile(r"\{(\w+)(?::((?:[^{}]|\{[^{}]*\})*))?\}")


def route(name: str, path: str, methods: list[str] | None = None, requirements: dict | None = None):
    """Mark a ControllerBase method as the handler of `path` (for `methods`, or any)."""
    def mark(method):
        method.routing_info = {"name": name, "path": path, "methods": methods, "requirements": requirements or {}}
        return method
    return mark


class ControllerBase:
    """A request's handler object: made per request with the request, the data its class was
    registered with, and the application's configuration."""

    def __init__(self, req, link, data, **config):
        self.req, self.link, self.data = req, link, data
        self.parent = config.get("parent")


def _compile(path: str, requirements: dict) -> re.Pattern:
    out, pos = [], 0
    for m in _PART.finditer(path):
        out.append(re.escape(path[pos:m.start()]))
        out.append(f"(?P<{m[1]}>{requirements.get(m[1]) or m[2] or '[^/]+'})")
        pos = m.end()
    out.append(re.escape(path[pos:]))
    return re.compile("".join(out))


def _json_error(status: int, message: str) -> webob.Response:
    return webob.Response(status=status, content_type="application/json", charset="utf-8",
                          body=json.dumps({"error": message}).encode() + b"\n")


class WSGIApplication:
    """The WSGI application: the routes of every registered controller class, tried in the order
    they were registered."""

    def __init__(self, **config):
        self.config = config
        self.routes: list[tuple[re.Pattern, list[str] | None, type, str, object]] = []

    def register(self, controller: type, data=None) -> None:
        for attr in dir(controller):
            info = getattr(getattr(controller, attr), "routing_info", None)
            if info:
                self.routes.append((_compile(info["path"], info["requirements"]), info["methods"], controller,
                                    attr, data))

    def __call__(self, environ, start_response):
        return self._respond(webob.Request(environ))(environ, start_response)

    def _respond(self, req: webob.Request) -> webob.Response:
        path = req.environ.get("PATH_INFO", "")
        allowed = False
        for pattern, methods, controller, action, data in self.routes:
            match = pattern.fullmatch(path)
            if not match:
                continue
            if methods and req.method not in methods:
                allowed = True
                continue
            try:
                return getattr(controller(req, None, data, **self.config), action)(req, **match.groupdict())
            except webob.exc.HTTPException as err:
                return err
            except Exception:  # a controller's bug must not reach the client as a traceback
                LOG.exception("%s %s failed", req.method, path)
                return _json_error(500, "internal error (logged)")
        return _json_error(405, f"{req.method} is not allowed here") if allowed else _json_error(404, "no such path")


def register_wsapi_options(conf) -> None:
    """--wsapi-host and --wsapi-port on the framework's ConfigOpts `conf`, as Ryu's WSGI module
    registers them (os-ken has neither). Command-line options, so the launcher registers them
    before it parses its arguments; a process that parsed them already (a test importing late)
    gets them as plain options."""
    from oslo_config import cfg as oslo

    opts = [oslo.StrOpt("wsapi-host", default="0.0.0.0", help="the REST API's address (ours defaults to loopback)"),
            oslo.IntOpt("wsapi-port", default=8080, help="the REST API's port")]
    for opt in opts:
        if opt.dest in conf:
            continue
        try:
            conf.register_cli_opt(opt)
        except oslo.ArgsAlreadyParsedError:
            conf.register_opt(opt)

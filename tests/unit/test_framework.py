"""The framework layer: which framework a process uses (ryu_app/framework_choice.py), and the
WSGI routing ryu_app/wsgi.py gives os-ken, checked against Ryu's own on the real REST controller:
the same requests through both answer the same."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import webob
from ryu.app import wsgi as ryu_wsgi

from ryu_app import rest, wsgi
from tests.unit.controller_parts import ControllerParts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _choose(env: dict) -> subprocess.CompletedProcess:
    """choose() in a fresh interpreter (the choice is made once per process)."""
    code = "from ryu_app.framework_choice import choose, chosen_version; print(choose(), chosen_version())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, **env})


def test_the_framework_is_ryu_where_it_imports_else_as_set_and_a_bad_setting_is_refused():
    """Rule: with Ryu importable (this venv) and nothing set, Ryu; CKCD_COEX_FRAMEWORK picks one;
    any other value is refused naming the setting."""
    auto = _choose({"CKCD_COEX_FRAMEWORK": ""})
    assert auto.returncode == 0 and auto.stdout.startswith("ryu {'name': 'ryu', 'version': '4.34'}"), auto.stderr
    assert _choose({"CKCD_COEX_FRAMEWORK": "os-ken"}).stdout.startswith("os-ken")
    bad = _choose({"CKCD_COEX_FRAMEWORK": "nox"})
    assert bad.returncode != 0 and "CKCD_COEX_FRAMEWORK='nox': use one of ryu, os-ken" in bad.stderr


def test_the_framework_already_imported_wins_over_the_setting():
    """Rule: under ryu-manager Ryu is imported: an app must subclass its base class, whatever the
    environment says."""
    code = ("import ryu.base.app_manager; import os; os.environ['CKCD_COEX_FRAMEWORK'] = 'os-ken'; "
            "from ryu_app import framework; print(framework.NAME, framework.App.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.split() == ["ryu", "ryu.base.app_manager"], done.stderr


class Things(wsgi.ControllerBase):
    @wsgi.route("thing", "/things/{name}", methods=["GET"])
    def get(self, req, name):
        return webob.Response(json_body={"name": name, "data": self.data})

    @wsgi.route("n", "/n/{num}", requirements={"num": r"[0-9]+"})
    def number(self, req, num):
        if num == "0":
            raise webob.exc.HTTPConflict()
        if num == "13":
            raise RuntimeError("a bug")
        return webob.Response(text=num)


def _call(app, method: str, path: str) -> webob.Response:
    return webob.Request.blank(path, method=method).get_response(app)


def test_routes_take_their_parts_methods_and_requirements_and_errors_are_json():
    """Rule: a template's {part} is one path segment, a requirement overrides its pattern; an
    unknown path is a JSON 404, a method the route does not take a JSON 405, a controller's
    exception a JSON 500 without its traceback, an HTTPException passes as it is."""
    app = wsgi.WSGIApplication()
    app.register(Things, data=7)
    assert _call(app, "GET", "/things/a-b").json == {"name": "a-b", "data": 7}
    assert _call(app, "GET", "/things/a/b").status_int == 404
    refused = _call(app, "POST", "/things/a")
    assert refused.status_int == 405 and refused.json == {"error": "POST is not allowed here"}
    assert _call(app, "GET", "/n/42").text == "42"
    assert _call(app, "GET", "/n/4x").status_int == 404 and _call(app, "GET", "/n/4x").json["error"] == "no such path"
    assert _call(app, "GET", "/n/0").status_int == 409
    bug = _call(app, "GET", "/n/13")
    assert bug.status_int == 500 and "Traceback" not in bug.text and bug.json == {"error": "internal error (logged)"}


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/coex/v1/state", None), ("GET", "/coex/v1/policy", None), ("GET", "/coex/v1/nope", None),
    ("POST", "/coex/v1/rules", b'{"name": "r", "aggregate": "low_delay", "match": {"ip_proto": 6}}'),
    ("POST", "/coex/v1/rules", b"{not json"), ("GET", "/coex/v1/ui", None), ("GET", "/a%0Ab", None),
])
def test_the_rest_api_answers_the_same_through_our_routing_and_ryus(method, path, body):
    """Rule: ryu_app/wsgi.py serves rest.RestController as Ryu's WSGI does: same status, type and
    body for every request (one controller's parts each, so a write in one does not show in the
    other)."""
    answers = []
    for app in (ryu_wsgi.WSGIApplication(), wsgi.WSGIApplication()):
        rest.register(app, ControllerParts().api())
        req = webob.Request.blank(path, method=method, body=body or b"",
                                  headers={"Content-Type": "application/json"} if body else {})
        res = req.get_response(app)
        answers.append((res.status, res.content_type, res.body))
    assert answers[0] == answers[1]

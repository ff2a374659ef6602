"""The dashboard (/coex/v1/ui, ryu_app/ui/) as files the controller serves: its routes, and
what it may do - read our own endpoints only (no other host, no CDN, no changing call)."""

from __future__ import annotations

import re

from controller_parts import ControllerParts
from ryu_app.rest import UI_DIR, UI_FILES, Raw


def test_ui_routes_serve_the_files_with_their_types():
    api = ControllerParts().api()
    for path, name in (("/coex/v1/ui", "index.html"), ("/coex/v1/ui/", "index.html"),
                       ("/coex/v1/ui/app.js", "app.js"), ("/coex/v1/ui/style.css", "style.css")):
        status, payload, _ = api.handle("GET", path, {}, b"")
        assert status == 200 and isinstance(payload, Raw), path
        assert payload.body == (UI_DIR / name).read_bytes() and payload.content_type == UI_FILES[name]
    status, payload, _ = api.handle("GET", "/coex/v1/ui/../rest.py", {}, b"")
    assert status == 404 and set(payload) == {"error", "field"}
    status, payload, _ = api.handle("GET", "/coex/v1/ui/secret.txt", {}, b"")
    assert status == 404 and payload["field"] == "asset"
    status, _, headers = api.handle("PUT", "/coex/v1/ui", {}, b"{}")
    assert status == 405 and headers == {"Allow": "GET"}


def test_the_page_reads_only_our_endpoints_and_changes_nothing():
    text = {name: (UI_DIR / name).read_text() for name in UI_FILES}
    for name, body in text.items():
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", body, re.I), f"{name} refers to another host"
    js = text["app.js"]
    assert not re.search(r"\b(PUT|POST|DELETE|PATCH)\b|method\s*:", js), "the dashboard must only GET"
    assert set(re.findall(r'get\(\s*[`"]([^`"]+)[`"]', js)) == {
        "/metrics", "${API}/state", "${API}/heavy-hitters", "${API}/policy"}
    # "data:," as the icon: no request for /favicon.ico (a 404 in the console)
    assert re.findall(r'(?:src|href)="([^"]+)"', text["index.html"]) == [
        "data:,", "/coex/v1/ui/style.css", "/metrics", "/coex/v1/ui/app.js"]

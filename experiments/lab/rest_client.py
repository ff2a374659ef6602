"""A small client for the controller's /coex/v1 REST API (stdlib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class CoexClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8080/coex/v1", token: str | None = None,
                 timeout_s: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body=None, raw: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as res:
                return res.status, json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as err:
            text = err.read()
            try:
                return err.code, json.loads(text)
            except ValueError:
                return err.code, {"error": f"non-JSON answer: {text[:200]!r}", "field": None}

    def get(self, path: str):
        return self.request("GET", path)

    def put(self, path: str, body):
        return self.request("PUT", path, body)

    def post(self, path: str, body):
        return self.request("POST", path, body)

    def delete(self, path: str):
        return self.request("DELETE", path)

    def ok(self, method: str, path: str, body=None) -> dict:
        """The call's JSON, or an exception carrying the API's error and field."""
        status, result = self.request(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status}: {result.get('error')} "
                               f"(field {result.get('field')})")
        return result

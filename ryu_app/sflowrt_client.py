"""A thin HTTP client for sFlow-RT (stdlib urllib): define the flow, poll the active flows.

It talks to an outside analyser, not to a switch, so it lives beside its one user, the
controller's heavy-hitter service (ryu_app/heavy_hitters.py).

    client = SFlowRTClient("http://127.0.0.1:8008")
    client.define_flow()                        # PUT /flow/ckcd_coex_flows/json
    events = client.poll_into(detector, now)    # GET /activeflows/ALL/ckcd_coex_flows/json

The bodies are built and parsed by coex.sflowrt (pure, documented there). Point the OVS
agent at sFlow-RT's port 6343 instead of the embedded collector (ovs_config.sflow).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from coex.sflowrt import (DEFAULT_FLOW_NAME, DEFAULT_KEYS, ActiveFlows, check_flow_name,
                          feed_detector, flow_definition, parse_active_flows)

MAX_BODY_BYTES = 16 << 20


class SFlowRTError(RuntimeError):
    pass


class SFlowRTClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8008", timeout_s: float = 2.0):
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be http(s)://host:port, got {base_url!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._defined: dict[str, tuple[str, str]] = {}

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> bytes:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                out = resp.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as err:
            raise SFlowRTError(f"{method} {path}: HTTP {err.code}") from None
        except (urllib.error.URLError, OSError) as err:
            raise SFlowRTError(f"{method} {path}: {err}") from None
        if len(out) > MAX_BODY_BYTES:
            raise SFlowRTError(f"{method} {path}: response larger than {MAX_BODY_BYTES} bytes")
        return out

    def version(self) -> str:
        return self._request("GET", "/version").decode(errors="replace").strip()

    def define_flow(self, name: str = DEFAULT_FLOW_NAME, keys: str = DEFAULT_KEYS,
                    value: str = "bytes", **options) -> dict:
        """PUT /flow/{name}/json. options: filter, t, n (see coex.sflowrt.flow_definition)."""
        check_flow_name(name)
        body = flow_definition(keys, value, **options)
        self._request("PUT", f"/flow/{name}/json", body)
        self._defined[name] = (keys, value)
        return body

    def delete_flow(self, name: str = DEFAULT_FLOW_NAME) -> None:
        check_flow_name(name)
        self._request("DELETE", f"/flow/{name}/json")
        self._defined.pop(name, None)

    def active_flows(self, name: str = DEFAULT_FLOW_NAME, agent: str = "ALL",
                     max_flows: int = 100, min_value: float = 0, agg_mode: str = "max"
                     ) -> ActiveFlows:
        """GET /activeflows/{agent}/{name}/json, parsed."""
        check_flow_name(name)
        if not isinstance(max_flows, int) or max_flows < 1:
            raise ValueError(f"max_flows must be an integer >= 1, got {max_flows!r}")
        if agg_mode not in ("max", "sum", "avg"):
            raise ValueError(f"agg_mode must be max, sum or avg, got {agg_mode!r}")
        query = urllib.parse.urlencode({"maxFlows": max_flows, "minValue": min_value,
                                        "aggMode": agg_mode})
        path = f"/activeflows/{urllib.parse.quote(agent, safe='.:;')}/{name}/json?{query}"
        keys, value = self._defined.get(name, (DEFAULT_KEYS, "bytes"))
        return parse_active_flows(self._request("GET", path), keys=keys, value=value)

    def poll_into(self, detector, now: float, name: str = DEFAULT_FLOW_NAME, **kw) -> list:
        """One poll: the active flows' rates into a HeavyHitterDetector; returns its events."""
        return feed_detector(detector, self.active_flows(name, **kw), now)

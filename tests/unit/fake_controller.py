"""A stand-in for the CoexController with what CoexApi (ryu_app/rest.py) asks of it:
switch 0x42 with ports 1 and 2, both served by ckcd-link, and the policy it holds."""

from __future__ import annotations

import logging
import types

from coex.policy import Policy

DPID = 0x42


class FakeController:
    def __init__(self, token=None):
        self.policy, self.policy_version = Policy(), 0
        self.datapaths = {DPID: object()}
        self.net = types.SimpleNamespace(ports={DPID: {1, 2}})
        self.config = types.SimpleNamespace(token=token)
        self.logger = logging.getLogger("fake_controller")

    def apply_policy(self, new, summary):
        self.policy, self.policy_version = new, self.policy_version + 1
        return self.policy_version

    def aqm_backend(self, dpid, port):
        return "ckcd-link", ""

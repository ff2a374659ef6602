"""Fixtures the lab test modules share (helpers and claims are in labkit.py)."""

from __future__ import annotations

import pytest

from experiments.lab.net import controlled_net
from topologies.dumbbell import Dumbbell

HH_OF_PORT, HH_REST_PORT = 16693, 18110


@pytest.fixture
def hh_lab(private_ovs, tmp_path):
    """The heavy-hitter lab: the real controller (fresh policy) and a Mininet dumbbell that
    pings without loss; yields (net, REST client, controller)."""
    with controlled_net(Dumbbell(), str(tmp_path), of_port=HH_OF_PORT, rest_port=HH_REST_PORT) as (net, ctl, api):
        assert net.pingAll(timeout=2) == 0.0
        yield net, api, ctl

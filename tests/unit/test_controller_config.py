"""The controller's settings (ryu_app/config.py): where an installed controller keeps its policy
when CKCD_COEX_DB does not say, and the addresses that are checked before anything listens."""

from __future__ import annotations

import pytest

from coex.policy import PolicyError
from ryu_app import config
from ryu_app.config import CoexConfig


def test_a_checkout_keeps_its_policy_in_its_state_dir():
    """Rule: running from a checkout (setup.py beside the packages), the default is its state/."""
    assert config.default_db_path({}) == f"{config.REPO}/state/policy.sqlite"


def test_an_installed_package_never_writes_into_site_packages(monkeypatch, tmp_path):
    """Rule: without a checkout around it, root's default is /var/lib/ckcd-coex and another
    user's is under XDG_STATE_HOME (else ~/.local/state), never beside the code."""
    monkeypatch.setattr(config, "REPO", str(tmp_path / "site-packages"))
    monkeypatch.setattr(config.os, "geteuid", lambda: 0)
    assert config.default_db_path({}) == "/var/lib/ckcd-coex/policy.sqlite"
    monkeypatch.setattr(config.os, "geteuid", lambda: 1000)
    assert config.default_db_path({"XDG_STATE_HOME": "/x/state"}) == "/x/state/ckcd-coex/policy.sqlite"
    monkeypatch.setenv("HOME", "/home/u")
    assert config.default_db_path({}) == "/home/u/.local/state/ckcd-coex/policy.sqlite"


def test_the_setting_wins(monkeypatch):
    """Rule: CKCD_COEX_DB, when set and not empty, is where the policy goes."""
    assert config.CoexConfig.from_env({"CKCD_COEX_DB": "/tmp/p.sqlite"}).db_path == "/tmp/p.sqlite"
    assert config.CoexConfig.from_env({"CKCD_COEX_DB": ""}).db_path == config.default_db_path({})


@pytest.mark.parametrize("bad", ["0.0.0.0:6343", "[::]:6343", "localhost:6343", "127.0.0.1", "127.0.0.1:70000",
                                 "[::ffff:127.0.0.1]:6343", "239.1.1.1:6343"])
def test_an_instance_collector_must_be_an_address_the_bridges_can_send_to(bad):
    """Rule: CKCD_COEX_SFLOW_COLLECTOR is where this instance listens and where the agents
    send, so an IP address and port, not a wildcard or a name; refused naming the setting."""
    with pytest.raises(PolicyError, match="CKCD_COEX_SFLOW_COLLECTOR"):
        CoexConfig.from_env({"CKCD_COEX_SFLOW_COLLECTOR": bad})
    assert CoexConfig.from_env({"CKCD_COEX_SFLOW_COLLECTOR": " 127.0.0.1:7343"}).sflow_collector == "127.0.0.1:7343"
    assert CoexConfig.from_env({}).sflow_collector is None

"""ryu_app.election: taking over, failing half way, stepping down.

The controller around the election stands in as a recorder (FakeController below, and says
so): the real Roles, PolicyStore (SQLite in a temporary directory) and LeaderLock; its trees,
heavy-hitter service, switch sync and switch-host configurator record the calls made on them;
its switches are tests/unit/test_switch_sync.RecordingSwitch. tests/integration/
test_failover_lab.py runs the whole of it with two real controllers.
"""

from __future__ import annotations

import importlib
import logging

from coex.election import LeaderLock
from coex.store import PolicyStore, StoreError
from coex.policy import Policy
from ryu_app import election
from ryu_app.election import Election
from ryu_app.framework import ofproto_v1_3
from ryu_app.roles import Roles
from ryu_app.view import PolicyInForce
from tests.unit.test_switch_sync import RecordingSwitch

parser = importlib.import_module(ofproto_v1_3.__name__ + "_parser")
ofp = ofproto_v1_3
LOG = logging.getLogger("test_election")


class Recorder:
    def __init__(self, calls, name):
        self._calls, self._name = calls, name

    def __getattr__(self, method):
        return lambda *args, **kw: self._calls.append((self._name, method))


class FakeController:
    def __init__(self, tmp_path, store=None):
        self.calls: list = []
        self.logger, self.identity, self.saving = LOG, "test", 0
        self.roles = Roles(LOG)
        self.store = store or PolicyStore(str(tmp_path / "policy.sqlite"))
        self.lock = LeaderLock(str(tmp_path / "policy.sqlite.leader"))
        self.in_force = PolicyInForce(Policy(), 0)
        self.datapaths = {1: RecordingSwitch(1)}
        for part in ("trees", "heavy_hitters", "sync", "switch_hosts"):
            setattr(self, part, Recorder(self.calls, part))

    @property
    def policy(self):
        return self.in_force.policy


class BrokenStore(PolicyStore):
    def begin_term(self, leader, now_ms):
        raise StoreError("the state cluster did not commit")


def test_a_takeover_asks_master_with_the_new_terms_id_after_adopting(tmp_path):
    """Rule: taking the lock begins a term; the predecessor's steerings are adopted once we
    lead and before any switch is asked; every connected switch is asked MASTER with the
    term's generation id."""
    ctl = FakeController(tmp_path)
    assert Election(ctl).try_to_lead() and ctl.roles.leading
    term = ctl.store.term()
    (req,) = ctl.datapaths[1].sent
    assert (req.role, req.generation_id) == (ofp.OFPCR_ROLE_MASTER, term.generation_id)
    assert ("heavy_hitters", "adopt") in ctl.calls


def test_a_takeover_that_fails_half_way_leaves_the_lock_to_others(tmp_path, monkeypatch):
    """Rule: if the term cannot be stored, we do not lead, the lock is released (another
    instance takes it at once) and we try again only after STALE_RETRY_S."""
    ctl = FakeController(tmp_path, BrokenStore(str(tmp_path / "policy.sqlite")))
    vote = Election(ctl)
    assert not vote.try_to_lead() and not ctl.roles.leading and ctl.datapaths[1].sent == []
    other = LeaderLock(ctl.lock.path)
    assert other.try_take()
    other.release()
    assert not vote.try_to_lead()  # within STALE_RETRY_S: not even tried
    assert not ctl.lock.held


def test_a_stale_master_request_steps_down_and_holds_off(tmp_path):
    """Rule: a switch refusing our MASTER request as stale (a newer term elsewhere) makes us
    stand by at once: the lock released, every switch asked SLAVE, and no new try to lead for
    STEP_DOWN_HOLD_S, although the lock is free."""
    ctl = FakeController(tmp_path)
    vote = Election(ctl)
    assert vote.try_to_lead()
    dp = ctl.datapaths[1]
    err = parser.OFPErrorMsg(dp, type_=ofp.OFPET_ROLE_REQUEST_FAILED, code=ofp.OFPRRFC_STALE, data=b"")
    err.xid = dp.sent[-1].xid
    vote.on_role_refused(dp, ctl.roles.on_error(1, err), err.code)
    assert not ctl.roles.leading and not ctl.lock.held
    assert dp.sent[-1].role == ofp.OFPCR_ROLE_SLAVE
    assert not vote.try_to_lead() and election.STEP_DOWN_HOLD_S >= 1
    assert LeaderLock(ctl.lock.path).try_take()  # free for the instance that leads now


def test_a_failed_takeover_hands_back_what_it_adopted(tmp_path):
    """Rule: a takeover that fails leaves detection standing by (stand_by: nothing it adopted
    stays in its books as if it led)."""
    ctl = FakeController(tmp_path, BrokenStore(str(tmp_path / "policy.sqlite")))
    assert not Election(ctl).try_to_lead()
    assert ("heavy_hitters", "stand_by") in ctl.calls


def test_the_sflow_agents_are_configured_by_the_leader_of_the_term_only(tmp_path):
    """Rule: configure_sampling runs for the term that asked while it lasts, never after a
    step-down; one that did not reach every bridge (the configurator said False) is retried at
    the next announcement although the collectors did not change."""
    ctl = FakeController(tmp_path)
    ctl.collectors = []
    vote = Election(ctl)
    assert vote.try_to_lead()
    term = ctl.roles.term
    vote.configure_sampling(term)
    assert ctl.calls.count(("switch_hosts", "configure_sampling")) == 1
    assert vote._sampling_stale  # the recorder answers None: not every bridge took it
    vote.step_down("test")
    vote.configure_sampling(term)
    assert ctl.calls.count(("switch_hosts", "configure_sampling")) == 1

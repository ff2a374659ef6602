"""ryu_app.roles and coex.election: an instance writes to a switch only once the switch
confirmed it MASTER, asks its role with the generation id of its term, and a standby asks for
the packet-ins a SLAVE does not get by default; the leader's lock is the kernel's (flock), so
the holder's death frees it.

The switch stands in as a recorder (tests/unit/test_switch_sync.RecordingSwitch: the
framework's own OpenFlow 1.3 messages, serialized as on the wire); its answers are the
framework's reply objects, built here. tests/integration/test_failover_lab.py runs two real
controllers against Open vSwitch.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import subprocess
import sys

import pytest

from coex.election import LeaderError, LeaderLock
from coex.store import Term
from ryu_app.framework import ofproto_v1_3
from ryu_app.roles import MASTER, SLAVE, Roles
from ryu_app.switch_sync import SwitchSync
from tests.unit.test_switch_sync import RecordingSwitch, policy, state

parser = importlib.import_module(ofproto_v1_3.__name__ + "_parser")
ofp = ofproto_v1_3
LOG = logging.getLogger("test_roles")
TERM = Term(epoch=3, generation_id=1_700_000_000_123, leader="test", since=0.0)


def role_reply(dp, xid: int, role: int, gen: int):
    msg = parser.OFPRoleReply(dp, role=role, generation_id=gen)
    msg.xid = xid
    return msg


def test_a_standby_asks_slave_with_the_newest_id_and_the_packet_ins_a_slave_lacks():
    """Rule: not leading, an instance asks SLAVE with the newest generation id it knows (an
    older one is refused as stale), asks as a slave for table-miss and to-controller
    packet-ins and every port status, and never may write, confirmed or not."""
    dp, roles = RecordingSwitch(), Roles(LOG)
    roles.ask(dp, newest_generation_id=41)
    async_, req = dp.sent
    assert isinstance(async_, parser.OFPSetAsync) and isinstance(req, parser.OFPRoleRequest)
    assert (req.role, req.generation_id) == (ofp.OFPCR_ROLE_SLAVE, 41)
    both = 1 << ofp.OFPR_NO_MATCH | 1 << ofp.OFPR_ACTION
    assert async_.packet_in_mask == [both, both] and async_.port_status_mask[1] == 0b111
    assert async_.flow_removed_mask[1] == 0
    assert roles.on_reply(1, role_reply(dp, req.xid, ofp.OFPCR_ROLE_SLAVE, 41)) == SLAVE
    assert roles.confirmed[1] == SLAVE and not roles.may_write(1)


def test_a_leader_writes_only_after_the_switch_confirms_master():
    """Rule: leading, an instance asks MASTER with its term's generation id and may write to
    the switch only once the switch's reply says MASTER; SwitchSync sends nothing before."""
    dp, roles = RecordingSwitch(), Roles(LOG)
    roles.term = TERM
    sync = SwitchSync(LOG, may_write=roles.may_write)
    sync.held[1] = state(policy())
    roles.ask(dp, newest_generation_id=0)
    (req,) = dp.sent
    assert (req.role, req.generation_id) == (ofp.OFPCR_ROLE_MASTER, TERM.generation_id)
    assert sync.converge(dp, state(policy(limited_queue={"enabled": True}))) is None
    assert dp.sent == [req] and sync.held[1] == state(policy())  # nothing sent, nothing assumed
    assert roles.on_reply(1, role_reply(dp, req.xid, ofp.OFPCR_ROLE_MASTER, TERM.generation_id)) == MASTER
    assert roles.may_write(1)
    assert sync.converge(dp, state(policy(limited_queue={"enabled": True}))) is not None
    assert any(isinstance(m, parser.OFPFlowMod) for m in dp.sent)


def test_an_answer_to_a_request_our_state_has_outrun_is_not_taken():
    """Rule: a reply confirms only the role our state asks now: a SLAVE reply that comes after
    we began to lead (our MASTER request still on its way) grants nothing, nor does a reply
    to no request of ours."""
    dp, roles = RecordingSwitch(), Roles(LOG)
    roles.ask(dp, newest_generation_id=0)
    slave_req = dp.sent[-1]
    roles.term = TERM
    roles.ask(dp, newest_generation_id=0)
    master_req = dp.sent[-1]
    assert roles.on_reply(1, role_reply(dp, slave_req.xid, ofp.OFPCR_ROLE_SLAVE, 0)) is None
    assert roles.on_reply(1, role_reply(dp, 999, ofp.OFPCR_ROLE_MASTER, TERM.generation_id)) is None
    assert not roles.may_write(1)
    assert roles.on_reply(1, role_reply(dp, master_req.xid, ofp.OFPCR_ROLE_MASTER, TERM.generation_id)) == MASTER


def test_a_refused_role_request_is_matched_to_what_was_asked():
    """Rule: an OFPET_ROLE_REQUEST_FAILED error names the role our request asked (the
    election steps down on a stale MASTER), and grants nothing."""
    dp, roles = RecordingSwitch(), Roles(LOG)
    roles.term = TERM
    roles.ask(dp, 0)
    err = parser.OFPErrorMsg(dp, type_=ofp.OFPET_ROLE_REQUEST_FAILED, code=ofp.OFPRRFC_STALE, data=b"")
    err.xid = dp.sent[-1].xid
    assert roles.on_error(1, err) == MASTER and not roles.may_write(1)
    assert roles.on_error(1, err) is None  # answered once


def test_the_leaders_lock_is_exclusive_and_freed_by_the_holders_death(tmp_path):
    """Rule: one holder at a time; a holder killed with SIGKILL frees the lock (the kernel
    drops it with the process's files), so a standby's next try takes it."""
    path = str(tmp_path / "policy.sqlite.leader")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from coex.election import LeaderError, LeaderLock\n"
                               f"assert LeaderLock({path!r}).try_take(); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert holder.stdout.readline().strip() == "held"
        standby = LeaderLock(path)
        assert not standby.try_take() and not standby.held
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert standby.try_take() and standby.held
        assert not LeaderLock(path).try_take()
        standby.release()
        assert LeaderLock(path).try_take()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_file_that_cannot_be_trusted_is_refused(tmp_path):
    """Rule (the controller runs as root): a link at the lock's name, or a file others may
    write, is refused with an error naming it; nothing is locked."""
    target = tmp_path / "elsewhere"
    target.write_text("")
    link = tmp_path / "policy.sqlite.leader"
    link.symlink_to(target)
    with pytest.raises(LeaderError, match="policy.sqlite.leader"):
        LeaderLock(str(link)).try_take()
    shared = tmp_path / "shared.leader"
    shared.write_text("")
    shared.chmod(0o666)
    with pytest.raises(LeaderError, match="only we may write"):
        LeaderLock(str(shared)).try_take()


def test_a_lock_whose_file_was_replaced_is_not_held(tmp_path):
    """Rule: the lock is held on the file at its name now; once that file is removed (another
    instance would lock a new one there) the holder no longer holds it, and the new one can."""
    path = str(tmp_path / "policy.sqlite.leader")
    first = LeaderLock(path)
    assert first.try_take() and first.held
    os.unlink(path)
    assert not first.held
    second = LeaderLock(path)
    assert second.try_take() and second.held and not first.held

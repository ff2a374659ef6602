"""coex.ovsdb_state on a real three-server OVSDB Raft cluster (ovs_config.state_cluster): the
policy store's compare-and-swap, the leader's lock (RFC 7047) and the writes it fences, and
what losing one server of three does to each.

No lab: the servers run as our children on loopback and unix sockets, no root needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from coex.ovsdb_state import OvsdbStore
from coex.remotes import parse_remotes
from coex.policy import Policy, PolicyError
from coex.store import FORGET_AFTER_S, INSTANCE_TTL_S, StaleVersion, StoreError
from ovs_config.state_cluster import StateCluster
from ryu_app.config import CoexConfig
from tests.waiting import eventually

QUEUES = Policy.from_dict({"approaches": {"separate_queues": True}})
PATHS = Policy.from_dict({"approaches": {"separate_paths": True}})


@pytest.fixture
def cluster(tmp_path):
    c = StateCluster(str(tmp_path / "cluster"))
    try:
        yield c.create()
    finally:
        c.stop()


def test_two_instances_share_the_policy_and_a_stale_save_is_refused(cluster):
    """Rule: what one instance saves the other reads; a save made from a version that is no
    longer the stored one is refused and changes nothing; the changes are listed newest first."""
    one, two = OvsdbStore(cluster.remotes), OvsdbStore(cluster.remotes)
    try:
        assert one.load() == (Policy(), 0)
        assert one.save(QUEUES, "queues", based_on=0) == 1
        eventually(lambda: two.version() == 1, timeout_s=5, interval_s=0.05, what="the save seen by the other")
        with pytest.raises(StaleVersion):
            two.save(PATHS, "paths", based_on=0)
        assert two.load() == (QUEUES, 1)
        assert two.save(PATHS, "paths", based_on=1) == 2
        eventually(lambda: one.load() == (PATHS, 2), timeout_s=5, interval_s=0.05, what="the second save seen")
        assert [c["summary"] for c in one.changes()] == ["paths", "queues"]
    finally:
        one.close()
        two.close()


def test_every_instance_says_where_its_collector_listens(cluster):
    """Rule: what each instance announces the other reads (the leader points the agents at
    it); one not heard of for INSTANCE_TTL_S drops out, and its row is deleted by the next
    announcement after FORGET_AFTER_S; no lock is needed (a standby announces too)."""
    one, two = OvsdbStore(cluster.remotes), OvsdbStore(cluster.remotes)
    try:
        one.announce("one", "127.0.0.1:6343", 1000.0)
        two.announce("two", "127.0.0.1:6344", 1000.0)
        two.announce("three", None, 1000.0)
        eventually(lambda: one.collectors(1001.0) == ["127.0.0.1:6343", "127.0.0.1:6344"], timeout_s=5,
                   interval_s=0.05, what="both collectors seen by the first instance")
        one.announce("one", "127.0.0.1:6343", 1005.0)
        assert one.collectors(1001.0 + INSTANCE_TTL_S) == ["127.0.0.1:6343"]
        one.announce("one", "127.0.0.1:6343", 1001.0 + FORGET_AFTER_S)
        eventually(lambda: sorted(r.identity for r in two._rows(two._data, "Instance")) == ["one"], timeout_s=5,
                   interval_s=0.05, what="the others' rows deleted")
    finally:
        one.close()
        two.close()


def test_the_lock_has_one_holder_and_fences_the_leaders_writes(cluster):
    """Rule: one holder at a time; the other's term and steering writes are refused (the IDL
    asserts the lock in them), and a released lock passes to the one waiting."""
    one, two = OvsdbStore(cluster.remotes), OvsdbStore(cluster.remotes)
    try:
        assert eventually(lambda: one.try_take(), timeout_s=5, interval_s=0.05, what="the lock granted")
        assert not two.try_take()
        eventually(lambda: two.contended, timeout_s=5, interval_s=0.05, what="the server's answer: held by another")
        assert not two.held
        term = one.begin_term("one", now_ms=1_000)
        assert (term.epoch, term.generation_id) == (1, 1_000)
        with pytest.raises(StoreError, match="not stored"):
            two.begin_term("two", now_ms=2_000)
        flow = {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.3", "protocol": 6, "src_port": 1, "dst_port": 2}
        one.set_steered(flow, 1, 3, {"decision": "steered"})
        with pytest.raises(StoreError):
            two.set_steered(flow, 1, 3, None)
        eventually(lambda: two.steered() == [(flow, 1, 3, {"decision": "steered"})], timeout_s=5, interval_s=0.05,
                   what="the steering seen by the standby")
        one.release()
        assert eventually(lambda: two.held, timeout_s=5, interval_s=0.05, what="the lock passed on")
        assert two.begin_term("two", now_ms=500).generation_id == 1_001
        assert not one.try_take()  # asking again after a release: in the queue behind the holder
        eventually(lambda: one.contended, timeout_s=5, interval_s=0.05, what="the released one waiting")
    finally:
        one.close()
        two.close()


def test_a_dead_holder_frees_the_lock(cluster, tmp_path):
    """Rule: a holder killed with SIGKILL (its connection closes) frees the lock for the next."""
    code = ("import sys, time; from coex.ovsdb_state import OvsdbStore\n"
            f"s = OvsdbStore({cluster.remotes!r})\n"
            "while not s.try_take(): time.sleep(0.05)\n"
            "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    standby = None
    try:
        assert holder.stdout.readline().strip() == "held"
        standby = OvsdbStore(cluster.remotes)
        assert not standby.try_take()
        eventually(lambda: standby.contended, timeout_s=5, interval_s=0.05, what="the lock held by the other")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        started = time.monotonic()
        eventually(lambda: standby.held, timeout_s=5, interval_s=0.02, what="the lock taken after the holder died")
        print(f"lock taken {time.monotonic() - started:.3f} s after the holder's death")
    finally:
        holder.kill()
        holder.wait()
        if standby is not None:
            standby.close()


def test_the_cluster_goes_on_without_its_leader_server(cluster):
    """Rule: with one server of three killed (the Raft leader), saves still commit and the lock
    is granted again (a lock lives on the server that granted it, so its holder asks anew)."""
    store = OvsdbStore(cluster.remotes)
    try:
        assert eventually(lambda: store.try_take(), timeout_s=5, interval_s=0.05, what="the lock granted")
        assert store.save(QUEUES, "before", based_on=0) == 1
        killed = cluster.leader()
        cluster.kill(killed)
        started = time.monotonic()
        eventually(lambda: cluster.leader() not in (None, killed), timeout_s=15, what="a new Raft leader")
        assert eventually(lambda: store.held, timeout_s=15, interval_s=0.05, what="the lock again")
        print(f"lock held again {time.monotonic() - started:.3f} s after the Raft leader's death")
        assert store.save(PATHS, "after", based_on=1) == 2
        assert store.begin_term("me", now_ms=1).epoch == 1
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["tcp:host", "unix:relative", "file:/x", "tcp:a:1,ssl:b", "unix:/a/../b", ""])
def test_a_cluster_address_that_is_not_an_ovsdb_remote_is_refused(bad):
    """Rule: CKCD_COEX_CLUSTER is a comma-separated list of tcp:HOST:PORT, ssl:HOST:PORT or
    unix:/PATH; anything else is refused naming the setting and the entry."""
    with pytest.raises(PolicyError, match="CKCD_COEX_CLUSTER"):
        parse_remotes(bad)
    with pytest.raises(PolicyError, match="CKCD_COEX_CLUSTER"):  # the controller's settings, read at start
        CoexConfig.from_env({"CKCD_COEX_CLUSTER": bad or ","})
    assert parse_remotes("tcp:10.0.0.1:6641, unix:/run/a.sock") == "tcp:10.0.0.1:6641,unix:/run/a.sock"


def test_a_commit_that_times_out_still_lets_the_lock_go(cluster):
    """Rule (a leader's takeover that fails half way must not leave it unable to give the lock
    up): with every server stopped (SIGSTOP), a term's commit gives up after COMMIT_TIMEOUT_S
    with StoreError, and release() then frees the lock for the others once the cluster runs."""
    one, two = OvsdbStore(cluster.remotes), OvsdbStore(cluster.remotes)
    try:
        assert eventually(lambda: one.try_take(), timeout_s=5, interval_s=0.05, what="the lock granted")
        assert not two.try_take()
        for p in cluster.procs:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            with pytest.raises(StoreError, match="did not commit"):
                one.begin_term("one", now_ms=1)
            one.release()
        finally:
            for p in cluster.procs:
                os.kill(p.pid, signal.SIGCONT)
        assert eventually(lambda: two.held, timeout_s=10, interval_s=0.05, what="the lock passed on")
    finally:
        one.close()
        two.close()


def test_ssl_remotes_need_the_key_certificate_and_ca():
    """Rule: an ssl: remote without the files to speak TLS is refused at start, naming them."""
    with pytest.raises(StoreError, match="CKCD_COEX_OVSDB_SSL_CERT, CKCD_COEX_OVSDB_SSL_CA"):
        OvsdbStore("ssl:127.0.0.1:1", ("/etc/key.pem", None, None))

"""The SQLite policy store (real SQLite files)."""

import sqlite3

import pytest

from coex.policy import Policy
from coex.store import FORGET_AFTER_S, INSTANCE_TTL_S, MAX_COLLECTORS, PolicyStore, StaleVersion, StoreError


def test_empty_store_gives_the_default_policy(tmp_path):
    policy, version = PolicyStore(str(tmp_path / "p.sqlite")).load()
    assert policy == Policy() and version == 0


def test_saved_policy_survives_reopening(tmp_path):
    path = str(tmp_path / "sub" / "p.sqlite")
    store = PolicyStore(path)
    p = Policy.from_dict({"approaches": {"separate_paths": True}})
    assert store.save(p, "separate paths on") == 1
    assert store.save(p.edited(lambda d: d["approaches"].update(separate_queues=True)), "queues on") == 2
    store.close()
    again, version = PolicyStore(path).load()
    assert version == 2 and again.approaches.separate_paths and again.approaches.separate_queues
    assert [c["summary"] for c in PolicyStore(path).changes()] == ["queues on", "separate paths on"]


def test_committed_before_save_returns(tmp_path):
    path = str(tmp_path / "p.sqlite")
    PolicyStore(path).save(Policy.from_dict({"approaches": {"separate_queues": True}}), "x")
    # A second, independent connection sees it at once.
    doc = sqlite3.connect(path).execute("SELECT doc FROM policy").fetchone()[0]
    assert '"separate_queues": true' in doc


def test_a_failed_transaction_leaves_the_stored_policy(tmp_path):
    store = PolicyStore(str(tmp_path / "p.sqlite"))
    store.save(Policy(), "first")
    with pytest.raises(sqlite3.Error):
        with store._transaction():
            store._db.execute("UPDATE policy SET doc = 'broken' WHERE id = 1")
            store._db.execute("INSERT INTO nosuchtable VALUES (1)")
    assert store.load() == (Policy(), 1)


def test_a_stored_document_that_does_not_validate_is_reported(tmp_path):
    path = str(tmp_path / "p.sqlite")
    PolicyStore(path).save(Policy(), "ok")
    db = sqlite3.connect(path)
    db.execute("UPDATE policy SET doc = '{\"rules\": 5}'")
    db.commit()
    with pytest.raises(StoreError, match="does not validate"):
        PolicyStore(path).load()


def test_a_file_that_is_not_sqlite_is_reported(tmp_path):
    path = tmp_path / "p.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not usable"):
        PolicyStore(str(path)).load()


def test_a_save_from_an_older_version_is_refused_and_changes_nothing(tmp_path):
    """Rule (two instances share the store, docs/ha.md): a save names the version it was made
    from; if another instance stored one since, it is refused and the stored policy stays."""
    path = str(tmp_path / "p.sqlite")
    one, two = PolicyStore(path), PolicyStore(path)
    queues = Policy.from_dict({"approaches": {"separate_queues": True}})
    assert one.save(queues, "one", based_on=0) == 1
    with pytest.raises(StaleVersion) as err:
        two.save(Policy.from_dict({"approaches": {"separate_paths": True}}), "two", based_on=0)
    assert (err.value.based_on, err.value.stored) == (0, 1) and "version 1" in str(err.value)
    assert two.load() == (queues, 1) and two.version() == 1
    assert two.save(queues, "two again", based_on=1) == 2


def test_each_term_outruns_the_last_and_the_clock(tmp_path):
    """Rule: a new term's epoch is the last one's plus one, and its generation id is above the
    last one's and at least the wall clock in ms (so it also outruns ids a switch saw before
    the file was made), below 2^63 (OpenFlow compares them as signed differences); with none
    left above the last one, an error, never the same id again."""
    path = str(tmp_path / "p.sqlite")
    store = PolicyStore(path)
    assert store.term() is None
    first = store.begin_term("a", now_ms=1_000)
    assert (first.epoch, first.generation_id, first.leader) == (1, 1_000, "a")
    second = PolicyStore(path).begin_term("b", now_ms=500)  # a clock that went back
    assert (second.epoch, second.generation_id) == (2, 1_001)
    assert store.term() == second
    assert store.begin_term("c", now_ms=2**63 - 1).generation_id == 2**63 - 1
    with pytest.raises(StoreError, match="no newer one"):  # never the same id again (no clamping)
        store.begin_term("d", now_ms=0)
    assert store.term().leader == "c"


def test_steered_flows_are_kept_for_the_next_leader(tmp_path):
    """Rule: a steering is stored with its record until it is released at that port."""
    path = str(tmp_path / "p.sqlite")
    store = PolicyStore(path)
    flow = {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.3", "protocol": 6, "src_port": 40000, "dst_port": 5201}
    store.set_steered(flow, 1, 3, {"decision": "steered", "estimate_bps": 9e6})
    store.set_steered(flow, 2, 1, {"decision": "steered", "estimate_bps": 8e6})
    store.set_steered(flow, 1, 3, None)
    store.set_steered(flow, 2**64 - 1, 1, {"decision": "steered"})  # any datapath id
    assert sorted(PolicyStore(path).steered(), key=lambda e: e[1]) == [
        (flow, 2, 1, {"decision": "steered", "estimate_bps": 8e6}), (flow, 2**64 - 1, 1, {"decision": "steered"})]


GOOD_FLOW = '{"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "protocol": 6, "src_port": 1, "dst_port": 2}'


@pytest.mark.parametrize("flow, dpid, port, record", [
    ('{"src_ip": "10.0.0.1", "dst_ip": "x", "protocol": 6, "src_port": 1, "dst_port": 2}', "1", 1, "{}"),
    ('{"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "protocol": 6, "src_port": -1, "dst_port": 2}', "1", 1, "{}"),
    ('{"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "protocol": 6, "src_port": 1}', "1", 1, "{}"),
    ("[]", "1", 1, "{}"), ("not json", "1", 1, "{}"), (GOOD_FLOW, "zz", 1, "{}"), (GOOD_FLOW, "0", 1, "{}"),
    (GOOD_FLOW, "1", 0, "{}"), (GOOD_FLOW, "1", 1, "[]"),
])
def test_a_stored_steering_that_does_not_check_out_is_skipped(tmp_path, flow, dpid, port, record):
    """Rule: the store is shared (other instances, whoever can write the file): a steering row
    that is not a 5-tuple, a datapath id and a port is skipped, never steered."""
    path = str(tmp_path / "p.sqlite")
    store = PolicyStore(path)
    good = {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.3", "protocol": 6, "src_port": 40000, "dst_port": 5201}
    store.set_steered(good, 1, 3, {"decision": "steered"})
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO steered (flow, dpid, port, record) VALUES (?, ?, ?, ?)", (flow, dpid, port, record))
    assert store.steered() == [(good, 1, 3, {"decision": "steered"})]


def test_the_live_instances_collectors_are_the_agents_targets(tmp_path):
    """Rule: an instance's collector counts while it was heard of within INSTANCE_TTL_S; each
    address once, sorted; an instance without one adds none; one gone for FORGET_AFTER_S is
    deleted at the next announcement."""
    path = str(tmp_path / "p.sqlite")
    store = PolicyStore(path)
    store.announce("a", "127.0.0.1:6343", 1000.0)
    store.announce("b", "127.0.0.1:6344", 1000.0)
    store.announce("c", None, 1000.0)
    store.announce("d", "127.0.0.1:6343", 1000.0)
    assert PolicyStore(path).collectors(1000.0 + INSTANCE_TTL_S) == ["127.0.0.1:6343", "127.0.0.1:6344"]
    store.announce("a", "127.0.0.1:6343", 1005.0)
    assert store.collectors(1001.0 + INSTANCE_TTL_S) == ["127.0.0.1:6343"]
    store.announce("a", "127.0.0.1:6343", 1001.0 + FORGET_AFTER_S)
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT identity FROM instances")] == ["a"]


@pytest.mark.parametrize("bad", ["host:6343", "127.0.0.1", "127.0.0.1:0", "1.2.3.4:5; rm -rf /", "[::1]:99999",
                                 "0.0.0.0:6343", "[::ffff:10.0.0.9]:6343", "224.0.0.1:6343", "255.255.255.255:6343",
                                 "10.0.0.9:６３４３"])
def test_a_stored_collector_that_is_not_an_address_is_skipped(tmp_path, bad):
    """Rule: the store is shared and its collectors become ovs-vsctl arguments on every
    bottleneck bridge: one that is not ip:port is skipped."""
    store = PolicyStore(str(tmp_path / "p.sqlite"))
    store.announce("good", "10.0.0.9:6343", 5.0)
    store.announce("bad", bad, 5.0)
    assert store.collectors(6.0) == ["10.0.0.9:6343"]


def test_the_collectors_are_bounded_and_none_lives_forever(tmp_path):
    """Rule: at most MAX_COLLECTORS collectors, the most recently heard (OVS copies each datagram
    to every target); a row from the future is not live (it would never age) and is deleted by
    the next announcement."""
    path = str(tmp_path / "p.sqlite")
    store = PolicyStore(path)
    for i in range(MAX_COLLECTORS + 3):
        store.announce(f"i{i}", f"127.0.0.{i + 1}:6343", 100.0 + i)
    live = store.collectors(100.0 + MAX_COLLECTORS + 2)
    assert live == sorted(f"127.0.0.{i + 1}:6343" for i in range(3, MAX_COLLECTORS + 3))
    store.announce("future", "10.9.9.9:6343", 1e18)
    assert "10.9.9.9:6343" not in store.collectors(200.0)
    store.announce("now", "10.0.0.1:6343", 200.0)
    with sqlite3.connect(path) as db:
        assert "future" not in [r[0] for r in db.execute("SELECT identity FROM instances")]

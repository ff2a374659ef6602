"""The SQLite policy store (real SQLite files)."""

import sqlite3

import pytest

from coex.policy import Policy
from coex.store import PolicyStore, StoreError


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

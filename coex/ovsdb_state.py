"""The policy store and the leader's lock on a clustered OVSDB (docs/ha.md), for instances on
several hosts: the same methods as coex.store.PolicyStore and coex.election.LeaderLock.

Open vSwitch's database server is the engine: three ovsdb-servers joined in a Raft cluster
(`ovsdb-tool create-cluster` / `join-cluster`) keep the database (coex/ckcd_coex.ovsschema:
the policy and its version, the changes, the leader's term, the steered heavy hitters, the
instances and their sFlow collectors) while
two of them live. Both connections below speak to the cluster's leader only (the Python IDL's
leader_only), which moves with it.

- The lock is RFC 7047's (section 4.1.8), as ovn-northd uses it: one connection asks for it
  and holds it while that connection lives. A Raft leader keeps its locks to itself, so when
  it fails every client reconnects to the next one and asks again: whoever held the lock
  loses it, and steps down (ryu_app.election) until it is granted again. Writes that only a
  leader may make (its term, its steerings) go through that connection, and the IDL asserts
  the lock in each of them: a leader that lost it cannot write them.
- The policy goes through a second connection, without the lock, so a standby can store a
  REST change; the version is compared and swapped (`verify`) as with SQLite.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import ovs.db.idl
import ovs.stream

from coex.policy import Policy, PolicyError
from coex.store import FORGET_AFTER_S, StaleVersion, StoreError, Term, checked_steerings, live_collectors, next_term

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckcd_coex.ovsschema")
LOCK = "ckcd_coex_leader"
CONNECT_TIMEOUT_S = 10.0   # the first copy of the database, at start
COMMIT_TIMEOUT_S = 5.0     # one transaction (a Raft commit needs a majority)
RECONNECT_MIN_MS, RECONNECT_MAX_MS = 100, 500   # between tries of the cluster's servers


def use_ssl(key: str | None, cert: str | None, ca: str | None) -> None:
    """The private key, certificate and CA the IDL's ssl: connections use (process-wide, as
    Open vSwitch's stream library keeps them); StoreError naming what is missing."""
    missing = [name for name, v in (("CKCD_COEX_OVSDB_SSL_KEY", key), ("CKCD_COEX_OVSDB_SSL_CERT", cert),
                                    ("CKCD_COEX_OVSDB_SSL_CA", ca)) if not v]
    if missing:
        raise StoreError(f"ssl: remotes of the state cluster need {', '.join(missing)}")
    ovs.stream.Stream.ssl_set_private_key_file(key)
    ovs.stream.Stream.ssl_set_certificate_file(cert)
    ovs.stream.Stream.ssl_set_ca_cert_file(ca)


def _open(remotes: str) -> ovs.db.idl.Idl:
    helper = ovs.db.idl.SchemaHelper(location=SCHEMA)
    helper.register_all()
    idl = ovs.db.idl.Idl(remotes, helper, leader_only=True)
    # When the Raft leader dies the IDL walks the other servers until one is elected (about a
    # second); its reconnect backoff would otherwise grow to 8 s between tries and keep us
    # without the lock, and without a leader, that long. Every server is tried at once.
    idl._session.reconnect.set_backoff(RECONNECT_MIN_MS, RECONNECT_MAX_MS)
    idl._session.reconnect.set_backoff_free_tries(remotes.count(",") + 1)
    return idl


def _connect(remotes: str) -> ovs.db.idl.Idl:
    """A connection with the first copy of the database in; StoreError after CONNECT_TIMEOUT_S."""
    idl = _open(remotes)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        idl.run()
        if idl.state == idl.IDL_S_MONITORING:
            return idl
        if time.monotonic() > deadline:
            idl.close()
            raise StoreError(f"the state cluster ({remotes}) did not answer within {CONNECT_TIMEOUT_S:.0f} s, or "
                             "holds an older schema that lacks a table of ours (it refuses their monitor): "
                             "ovsdb-client needs-conversion says, docs/ha.md")
        time.sleep(0.02)


def _transact(idl: ovs.db.idl.Idl, build) -> int:
    """Commit what build(txn) writes, built afresh from what the IDL holds each time the
    cluster answers TRY_AGAIN (a row we read changed meanwhile, or we were reconnecting to a
    new Raft leader); the final status (SUCCESS, UNCHANGED, NOT_LOCKED, ERROR...). build may
    raise to give up (a stale version). StoreError if nothing final comes within
    COMMIT_TIMEOUT_S."""
    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    while time.monotonic() < deadline:
        idl.run()  # never while a transaction is open: the IDL takes no news then
        txn = ovs.db.idl.Transaction(idl)
        try:
            build(txn)
        except BaseException:
            txn.abort()  # closes it: the IDL takes news again
            raise
        while (status := txn.commit()) == txn.INCOMPLETE and time.monotonic() < deadline:
            time.sleep(0.01)
            idl.run()
        if status == txn.INCOMPLETE:
            txn.abort()
        elif status != txn.TRY_AGAIN:
            return status
        time.sleep(0.05)
    raise StoreError(f"the state cluster did not commit within {COMMIT_TIMEOUT_S:.0f} s (no Raft leader, or no "
                     "majority of its servers)")


def status_text(status: int) -> str:
    return ovs.db.idl.Transaction.status_to_string(status)


class OvsdbStore:
    def __init__(self, remotes: str, ssl: tuple[str | None, str | None, str | None] = (None, None, None)):
        """ssl: the private key, certificate and CA files for ssl: remotes."""
        self.path = f"ovsdb cluster {remotes}"  # what logs and GET /changes name as the store
        self.remotes = remotes
        if any(r.startswith("ssl:") for r in remotes.split(",")):
            use_ssl(*ssl)
        self._data = _connect(remotes)
        self._locked = _connect(remotes)  # asks for the lock when we try to lead

    def run(self) -> None:
        """Take in what the cluster sent (the election loop calls this often)."""
        self._data.run()
        self._locked.run()

    def _rows(self, idl, table: str) -> list:
        idl.run()
        return list(idl.tables[table].rows.values())

    # --- the policy (any instance) --------------------------------------------------------

    def version(self) -> int:
        rows = self._rows(self._data, "Policy")
        return rows[0].version if rows else 0

    def load(self) -> tuple[Policy, int]:
        rows = self._rows(self._data, "Policy")
        if not rows:
            return Policy(), 0
        try:
            return Policy.from_dict(json.loads(rows[0].doc)), rows[0].version
        except (ValueError, PolicyError) as err:
            raise StoreError(f"stored policy in {self.path} (version {rows[0].version}) does not validate: "
                             f"{err}") from None

    def save(self, policy: Policy, summary: str, based_on: int | None = None) -> int:
        doc = json.dumps(policy.to_dict(), sort_keys=True)
        saved = []

        def build(txn):
            rows = list(self._data.tables["Policy"].rows.values())
            stored = rows[0].version if rows else 0
            if based_on is not None and based_on != stored:
                raise StaleVersion(based_on, stored)
            if rows:
                row = rows[0]
                row.verify("version")  # another instance's save in between: TRY_AGAIN, and we look again
            else:
                row = txn.insert(self._data.tables["Policy"])
            row.version, row.doc, row.updated_at = stored + 1, doc, time.time()
            change = txn.insert(self._data.tables["Change"])
            change.version, change.at, change.summary = stored + 1, time.time(), summary
            saved[:] = [stored + 1]

        for _ in range(3):
            status = _transact(self._data, build)
            if status == ovs.db.idl.Transaction.SUCCESS:
                return saved[0]
            if not (status == ovs.db.idl.Transaction.ERROR and saved[0] == 1):
                break
            # two first saves at once: the other's row broke maxRows; look again (a StaleVersion now)
        raise StoreError(f"{self.path}: the policy was not saved ({status_text(status)})")

    def changes(self, limit: int = 50) -> list[dict]:
        rows = sorted(self._rows(self._data, "Change"), key=lambda r: r.version, reverse=True)[:limit]
        return [{"version": r.version, "at": r.at, "summary": r.summary} for r in rows]

    # --- the leader's (through the locked connection) ----------------------------------------

    def term(self) -> Term | None:
        rows = self._rows(self._data, "Term")
        return Term(rows[0].epoch, rows[0].generation_id, rows[0].leader, rows[0].since) if rows else None

    def begin_term(self, leader: str, now_ms: int) -> Term:
        """As coex.store.PolicyStore.begin_term, committed only while we hold the lock."""
        idl, made = self._locked, []

        def build(txn):
            rows = list(idl.tables["Term"].rows.values())
            last = rows[0] if rows else None
            term = next_term(Term(last.epoch, last.generation_id, last.leader, last.since) if last else None,
                             leader, now_ms)
            if last is not None:
                last.verify("epoch")
            row = last or txn.insert(idl.tables["Term"])
            row.epoch, row.generation_id, row.leader, row.since = dataclasses.astuple(term)
            made[:] = [term]

        status = _transact(idl, build)
        if status != ovs.db.idl.Transaction.SUCCESS:
            raise StoreError(f"{self.path}: the new term was not stored ({status_text(status)})")
        return made[0]

    def steered(self) -> list[tuple[dict, int, int, dict]]:
        return checked_steerings((r.flow, r.dpid, r.port, r.record) for r in self._rows(self._data, "Steered"))

    def set_steered(self, flow: dict, dpid: int, port: int, record: dict | None) -> None:
        idl, key, where = self._locked, json.dumps(flow, sort_keys=True), f"{dpid:016x}"

        def build(txn):
            rows = [r for r in idl.tables["Steered"].rows.values() if (r.flow, r.dpid, r.port) == (key, where, port)]
            if record is None:
                for r in rows:
                    r.delete()
            else:
                row = rows[0] if rows else txn.insert(idl.tables["Steered"])
                row.flow, row.dpid, row.port, row.record = key, where, port, json.dumps(record, sort_keys=True)

        status = _transact(idl, build)
        if status not in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError(f"{self.path}: the steering of {key} was not stored ({status_text(status)})")

    # --- the instances (any instance, for itself) ----------------------------------------------

    def announce(self, identity: str, collector: str | None, now: float) -> None:
        def build(txn):
            rows = list(self._data.tables["Instance"].rows.values())
            mine = [r for r in rows if r.identity == identity]
            for r in rows:
                if r.identity != identity and not now - FORGET_AFTER_S <= r.seen <= now + FORGET_AFTER_S:
                    r.delete()
            row = mine[0] if mine else txn.insert(self._data.tables["Instance"])
            row.identity, row.collector, row.seen = identity, [] if collector is None else [collector], now

        status = _transact(self._data, build)
        if status not in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError(f"{self.path}: instance {identity} was not announced ({status_text(status)})")

    def collectors(self, now: float) -> list[str]:
        return live_collectors(((r.collector[0] if r.collector else None, r.seen)
                                for r in self._rows(self._data, "Instance")), now)

    # --- the lock (coex.election.LeaderLock's methods) -----------------------------------------

    @property
    def held(self) -> bool:
        """The lock is ours, granted by the Raft leader. The IDL asks for the lock as soon as
        it connects, before it has checked that the server leads; a follower's grant (until
        the IDL moves on) is not the cluster's and does not count."""
        idl = self._locked
        idl.run()
        return idl.has_lock and idl.state == idl.IDL_S_MONITORING

    @property
    def contended(self) -> bool:
        """We asked for the lock and another holds it."""
        self._locked.run()
        return self._locked.is_lock_contended

    def try_take(self) -> bool:
        """Ask for the lock (once: the server grants it when it is free) and say if we hold it."""
        if self._locked.lock_name is None:
            self._locked.set_lock(LOCK)
        return self.held

    def release(self) -> None:
        """Give the lock up by closing its connection, and open a new one that does not ask for
        it until try_take. (Unlocking on the same connection is not allowed while one of its
        transactions is still outstanding, as after a commit that timed out.)"""
        self._locked.close()
        self._locked = _open(self.remotes)

    def close(self) -> None:
        self._data.close()
        self._locked.close()


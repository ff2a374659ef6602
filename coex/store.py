"""The policy, persisted in SQLite.

One row holds the current document and its version; every accepted change also
appends to `changes` (what, when, by whom) so an operator can see how the policy
got where it is. save() commits before it returns: a change the REST API has
acknowledged survives a controller crash right after.

Two instances on one host share this file (docs/ha.md): a save names the version it
was made from and is refused if another instance saved since (compare-and-swap); the
leader's term (its epoch and OpenFlow generation id) and the heavy hitters it steers
are kept here too, for whoever leads next, and every instance's sFlow collector, which the
leader points the bridges' agents at.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import sqlite3
import time

from coex.policy import Policy, PolicyError
from coex.remotes import collector_problem, sflow_target

_SCHEMA = """
CREATE TABLE IF NOT EXISTS policy (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    doc TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    version INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS term (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL,
    generation_id INTEGER NOT NULL,
    leader TEXT NOT NULL,
    since REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS steered (
    flow TEXT NOT NULL,
    dpid TEXT NOT NULL,
    port INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (flow, dpid, port)
);
CREATE TABLE IF NOT EXISTS instances (
    identity TEXT PRIMARY KEY,
    collector TEXT,
    seen REAL NOT NULL
);
"""

# OpenFlow compares generation ids as signed 64-bit differences: one is stale when it is
# behind the last one the switch saw. Ids are kept below 2^63 so that never wraps.
GENERATION_MAX = 2**63 - 1
# Every instance says every ANNOUNCE_INTERVAL_S where its sFlow collector listens; one not heard
# of for INSTANCE_TTL_S is taken for gone (the clocks of instances on several hosts must agree
# better than that), and its row is deleted after FORGET_AFTER_S.
ANNOUNCE_INTERVAL_S = 2.0
INSTANCE_TTL_S = 10.0
FORGET_AFTER_S = 300.0
# OVS opens a socket per target and copies each datagram to every one: more than this many live
# collectors is someone filling the store, not a standby.
MAX_COLLECTORS = 8


@dataclasses.dataclass(frozen=True)
class Term:
    """A leader's term: its number, the OpenFlow generation id it claims MASTER with, who."""
    epoch: int
    generation_id: int
    leader: str
    since: float


def next_term(last: Term | None, leader: str, now_ms: int) -> Term:
    """The term after `last`: epoch one more, and a generation id above the last one and at
    least the wall clock in ms (so it also outruns ids a switch saw before the store was made).
    StoreError rather than an id that would not be above the last: at the top of the range a
    switch would take the same id again, and an old leader's requests would not be stale."""
    gen = max((last.generation_id if last else 0) + 1, now_ms)
    if gen > GENERATION_MAX:
        raise StoreError(f"the stored term's generation id ({last.generation_id if last else 0}) leaves no "
                         "newer one below 2^63: someone wrote it by hand? set it to the time in ms")
    return Term((last.epoch if last else 0) + 1, gen, leader, time.time())


def steered_entry(flow, dpid, port, record) -> tuple[dict, int, int, dict] | None:
    """A stored steering, checked: the store is shared, and its rows steer flows on our switches.
    None for one that is not (skipped, not trusted)."""
    try:
        key = {k: flow[k] for k in ("src_ip", "dst_ip", "protocol", "src_port", "dst_port")}
        ipaddress.IPv4Address(key["src_ip"]), ipaddress.IPv4Address(key["dst_ip"])
        ok = (all(type(key[k]) is int and 0 <= key[k] <= 65535 for k in ("src_port", "dst_port"))
              and type(key["protocol"]) is int and 0 <= key["protocol"] <= 255
              and type(dpid) is int and 0 < dpid < 2**64 and type(port) is int and 0 < port <= 0xFFFFFF00
              and isinstance(record, dict))
    except (KeyError, TypeError, ValueError):
        return None
    return (key, dpid, port, record) if ok else None


def checked_steerings(rows) -> list[tuple[dict, int, int, dict]]:
    """Stored steerings (flow JSON, dpid hex, port, record JSON), those that check out."""
    out = []
    for flow, dpid, port, record in rows:
        try:
            entry = steered_entry(json.loads(flow), int(dpid, 16), port, json.loads(record))
        except (TypeError, ValueError):
            entry = None
        if entry is not None:
            out.append(entry)
    return out


def live_collectors(rows, now: float) -> list[str]:
    """The collectors ((collector, seen) rows) of instances heard of within INSTANCE_TTL_S (and
    not from the future: such a row would never age), each once, the most recently heard
    MAX_COLLECTORS of them, sorted. One that is not an instance's collector (collector_problem)
    is skipped: the store is shared, and these become the agents' targets."""
    heard: dict[str, float] = {}
    for collector, seen in rows:
        if not isinstance(collector, str) or not isinstance(seen, (int, float)) \
                or not now - INSTANCE_TTL_S <= seen <= now + INSTANCE_TTL_S or collector_problem(collector):
            continue
        target = sflow_target(collector)
        heard[target] = max(seen, heard.get(target, seen))
    return sorted(sorted(heard, key=heard.get, reverse=True)[:MAX_COLLECTORS])


class StoreError(RuntimeError):
    pass


class StaleVersion(StoreError):
    """A save made from a version that is no longer the stored one."""

    def __init__(self, based_on: int, stored: int):
        super().__init__(f"the policy changed meanwhile: this change was made from version {based_on}, "
                         f"the stored policy is version {stored} (another instance?); read it and try again")
        self.based_on, self.stored = based_on, stored


class PolicyStore:
    def __init__(self, path: str):
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA synchronous=FULL")
            # Instances sharing the file (docs/ha.md) poll it: in WAL mode a reader never
            # waits for a writer, so one instance's save cannot stall another's event loop.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as err:
            raise StoreError(f"policy store {path} is not usable: {err}") from None

    def load(self) -> tuple[Policy, int]:
        """The stored policy and its version; the default policy at version 0 when empty."""
        row = self._db.execute("SELECT version, doc FROM policy WHERE id = 1").fetchone()
        if row is None:
            return Policy(), 0
        version, doc = row
        try:
            return Policy.from_dict(json.loads(doc)), version
        except (ValueError, PolicyError) as err:
            raise StoreError(f"stored policy in {self.path} (version {version}) does not validate: {err}; "
                             "fix or move the file away to start from the default policy") from None

    def run(self) -> None:
        """Nothing to take in: SQLite is read when asked (coex.ovsdb_state.OvsdbStore's IDL is not)."""

    def version(self) -> int:
        """The stored policy's version (0 when none): a cheap read, polled by every instance."""
        row = self._db.execute("SELECT version FROM policy WHERE id = 1").fetchone()
        return row[0] if row else 0

    def save(self, policy: Policy, summary: str, based_on: int | None = None) -> int:
        """Store a validated policy as the next version; committed when this returns. With
        `based_on`, only if that is still the stored version (else StaleVersion, nothing saved)."""
        now = time.time()
        doc = json.dumps(policy.to_dict(), sort_keys=True)
        with self._transaction():
            row = self._db.execute("SELECT version FROM policy WHERE id = 1").fetchone()
            stored = row[0] if row else 0
            if based_on is not None and based_on != stored:
                raise StaleVersion(based_on, stored)
            version = stored + 1
            self._db.execute("INSERT OR REPLACE INTO policy (id, version, doc, updated_at) VALUES (1, ?, ?, ?)",
                             (version, doc, now))
            self._db.execute("INSERT INTO changes (version, at, summary) VALUES (?, ?, ?)",
                             (version, now, summary))
        return version

    # --- the leader's term and what it steers ---------------------------------------------

    def term(self) -> Term | None:
        row = self._db.execute("SELECT epoch, generation_id, leader, since FROM term WHERE id = 1").fetchone()
        return Term(*row) if row else None

    def begin_term(self, leader: str, now_ms: int) -> Term:
        """The next term (next_term), for the instance that just took the leader's lock."""
        with self._transaction():
            term = next_term(self.term(), leader, now_ms)
            self._db.execute("INSERT OR REPLACE INTO term (id, epoch, generation_id, leader, since) "
                             "VALUES (1, ?, ?, ?, ?)", dataclasses.astuple(term))
        return term

    def steered(self) -> list[tuple[dict, int, int, dict]]:
        """The heavy hitters the leader steers: (flow, dpid, port, the record that steered it)."""
        return checked_steerings(self._db.execute("SELECT flow, dpid, port, record FROM steered").fetchall())

    def set_steered(self, flow: dict, dpid: int, port: int, record: dict | None) -> None:
        """A flow steered at (dpid, port) with its record, or released there (record None)."""
        key = json.dumps(flow, sort_keys=True)
        with self._transaction():
            if record is None:
                self._db.execute("DELETE FROM steered WHERE flow = ? AND dpid = ? AND port = ?",
                                 (key, f"{dpid:016x}", port))
            else:
                self._db.execute("INSERT OR REPLACE INTO steered (flow, dpid, port, record) VALUES (?, ?, ?, ?)",
                                 (key, f"{dpid:016x}", port, json.dumps(record, sort_keys=True)))

    # --- the instances ------------------------------------------------------------------------

    def announce(self, identity: str, collector: str | None, now: float) -> None:
        """Instance `identity` lives and its collector listens at `collector` (None: it has none);
        instances not heard of for FORGET_AFTER_S are deleted."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO instances (identity, collector, seen) VALUES (?, ?, ?)",
                             (identity, collector, now))
            self._db.execute("DELETE FROM instances WHERE seen < ? OR seen > ?",
                             (now - FORGET_AFTER_S, now + FORGET_AFTER_S))

    def collectors(self, now: float) -> list[str]:
        """The live instances' collectors (live_collectors)."""
        return live_collectors(self._db.execute("SELECT collector, seen FROM instances").fetchall(), now)

    def changes(self, limit: int = 50) -> list[dict]:
        rows = self._db.execute("SELECT version, at, summary FROM changes ORDER BY version DESC LIMIT ?",
                                (limit,)).fetchall()
        return [{"version": v, "at": at, "summary": s} for v, at, s in rows]

    def _transaction(self):
        db = self._db

        class _Tx:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, *_):
                db.execute("ROLLBACK" if exc_type else "COMMIT")
                return False

        return _Tx()

    def close(self) -> None:
        self._db.close()

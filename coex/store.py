"""The policy, persisted in SQLite.

One row holds the current document and its version; every accepted change also
appends to `changes` (what, when, by whom) so an operator can see how the policy
got where it is. save() commits before it returns: a change the REST API has
acknowledged survives a controller crash right after.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

from coex.policy import Policy, PolicyError

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
"""


class StoreError(RuntimeError):
    pass


class PolicyStore:
    def __init__(self, path: str):
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA synchronous=FULL")
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

    def save(self, policy: Policy, summary: str) -> int:
        """Store a validated policy as the next version; committed when this returns."""
        now = time.time()
        doc = json.dumps(policy.to_dict(), sort_keys=True)
        with self._transaction():
            row = self._db.execute("SELECT version FROM policy WHERE id = 1").fetchone()
            version = (row[0] if row else 0) + 1
            self._db.execute("INSERT OR REPLACE INTO policy (id, version, doc, updated_at) VALUES (1, ?, ?, ?)",
                             (version, doc, now))
            self._db.execute("INSERT INTO changes (version, at, summary) VALUES (?, ?, ?)",
                             (version, now, summary))
        return version

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

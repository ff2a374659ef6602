"""Controller settings, from the environment (ryu-manager parses its command line
before it imports our app, so app options cannot be command-line flags).

| variable | default | meaning |
|---|---|---|
| CKCD_COEX_DB | <repo>/state/policy.sqlite | SQLite file holding the policy |
| CKCD_COEX_TOKEN | (none) | bearer token required by every mutating REST call |
| CKCD_COEX_TOKEN_FILE | (none) | file holding that token (first line) |
| CKCD_COEX_REST_HOST | 127.0.0.1 | REST listen address unless --wsapi-host is given |
"""

from __future__ import annotations

import dataclasses
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class CoexConfig:
    db_path: str
    token: str | None
    rest_host: str

    @classmethod
    def from_env(cls, env=os.environ) -> "CoexConfig":
        token = env.get("CKCD_COEX_TOKEN") or None
        token_file = env.get("CKCD_COEX_TOKEN_FILE")
        if token is None and token_file:
            with open(token_file) as f:
                token = f.readline().strip() or None
        return cls(db_path=env.get("CKCD_COEX_DB", os.path.join(REPO, "state", "policy.sqlite")),
                   token=token, rest_host=env.get("CKCD_COEX_REST_HOST", "127.0.0.1"))

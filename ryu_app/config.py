"""Controller settings, from the environment (ryu-manager parses its command line
before it imports our app, so app options cannot be command-line flags).

| variable | default | meaning |
|---|---|---|
| CKCD_COEX_DB | <repo>/state/policy.sqlite | SQLite file holding the policy |
| CKCD_COEX_TOKEN | (none) | bearer token required by every mutating REST call |
| CKCD_COEX_TOKEN_FILE | (none) | file holding that token (first line) |
| CKCD_COEX_REST_HOST | 127.0.0.1 | REST listen address unless --wsapi-host is given |
| CKCD_COEX_POLICY | (none) | a policy document (JSON, as GET /coex/v1/policy shows it) applied at start |
| CKCD_COEX_QUEUE_BACKEND | auto | Separate Queues on ports without ckcd-link: auto (tc-htb on a userspace bridge, ovsdb-queue otherwise), tc-htb or ovsdb-queue |
| CKCD_COEX_CLUSTER | (none) | the OVSDB cluster that holds the policy and elects the leader when instances run on several hosts (comma-separated `tcp:HOST:PORT`, `ssl:HOST:PORT` or `unix:/PATH`; docs/ha.md); unset: the SQLite file of CKCD_COEX_DB and a lock file beside it |
| CKCD_COEX_SFLOW_COLLECTOR | (none) | `ip:port` where this instance's embedded sFlow collector listens, and which the bridges' agents send to besides the other instances' (docs/ha.md); unset: the policy's `heavy_hitters.collector` |
| CKCD_COEX_OVSDB_SSL_KEY, _CERT, _CA | (none) | the controller's private key, certificate and the switch hosts' CA, for `ssl:` OVSDB remotes (policy `switches`, docs/real-switches.md) and the state cluster's `ssl:` servers |

CKCD_COEX_POLICY is the configuration-file way to set policy (e.g. heavy-hitter
detection, or the sFlow-RT backend) without REST: at start the controller validates
it and, if it differs from the stored policy, stores it as the next version. REST
changes made afterwards are stored as usual and hold until the next start with the file.
"""

from __future__ import annotations

import dataclasses
import os

from coex.policy import Policy, PolicyError, load_json
from coex.remotes import instance_collector, parse_remotes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_db_path(env=os.environ) -> str:
    """Where the policy is stored when CKCD_COEX_DB does not say: state/ of the checkout the
    code runs from; for an installed package (no setup.py beside it) /var/lib/ckcd-coex as root,
    else $XDG_STATE_HOME/ckcd-coex (~/.local/state): never inside site-packages."""
    if os.path.exists(os.path.join(REPO, "setup.py")):
        return os.path.join(REPO, "state", "policy.sqlite")
    if os.geteuid() == 0:
        return "/var/lib/ckcd-coex/policy.sqlite"
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "ckcd-coex", "policy.sqlite")
QUEUE_BACKENDS = ("auto", "tc-htb", "ovsdb-queue")


@dataclasses.dataclass(frozen=True)
class CoexConfig:
    db_path: str
    token: str | None
    rest_host: str
    policy_path: str | None = None
    queue_backend: str = "auto"
    cluster: str | None = None  # OVSDB remotes of the state cluster (docs/ha.md)
    sflow_collector: str | None = None  # this instance's own collector address (docs/ha.md)

    @classmethod
    def from_env(cls, env=os.environ) -> "CoexConfig":
        token = env.get("CKCD_COEX_TOKEN") or None
        token_file = env.get("CKCD_COEX_TOKEN_FILE")
        if token is None and token_file:
            with open(token_file) as f:
                token = f.readline().strip() or None
        queue_backend = env.get("CKCD_COEX_QUEUE_BACKEND") or "auto"
        if queue_backend not in QUEUE_BACKENDS:
            raise PolicyError(f"CKCD_COEX_QUEUE_BACKEND: {queue_backend!r} is not one of "
                              f"{', '.join(QUEUE_BACKENDS)}", "CKCD_COEX_QUEUE_BACKEND")
        cluster = env.get("CKCD_COEX_CLUSTER") or None
        collector = env.get("CKCD_COEX_SFLOW_COLLECTOR") or None
        return cls(db_path=env.get("CKCD_COEX_DB") or default_db_path(env),
                   token=token, rest_host=env.get("CKCD_COEX_REST_HOST", "127.0.0.1"),
                   policy_path=env.get("CKCD_COEX_POLICY") or None, queue_backend=queue_backend,
                   cluster=parse_remotes(cluster) if cluster is not None else None,
                   sflow_collector=instance_collector(collector) if collector is not None else None)

    def policy_file(self) -> Policy | None:
        """The validated policy of CKCD_COEX_POLICY, or None when it is not set. Raises
        PolicyError whose message names the file and the field."""
        if self.policy_path is None:
            return None
        try:
            with open(self.policy_path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise PolicyError(f"CKCD_COEX_POLICY: cannot read {self.policy_path}: {err.strerror}") from None
        try:  # the same parser as a REST body: UTF-8, JSON, nesting capped (no RecursionError)
            doc = load_json(data, self.policy_path)
        except PolicyError as err:
            raise PolicyError(f"CKCD_COEX_POLICY: {err.message}") from None
        try:
            return Policy.from_dict(doc)
        except PolicyError as err:
            raise PolicyError(f"CKCD_COEX_POLICY: {self.policy_path}: {err.message}", err.field) from None

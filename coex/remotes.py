"""The state cluster's address (CKCD_COEX_CLUSTER, docs/ha.md), checked before anything
connects: comma-separated OVSDB remotes, each tcp:HOST:PORT, ssl:HOST:PORT or unix:/PATH."""

from __future__ import annotations

import re

from coex.policy import PolicyError

REMOTE = re.compile(r"(tcp|ssl):(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}|unix:/[A-Za-z0-9._/-]+")


def parse_remotes(value: str) -> str:
    """The remotes, blanks around commas removed; PolicyError naming the setting and the entry
    that is not a remote (a path with '..' in it is refused: say the directory plainly)."""
    remotes = [r.strip() for r in value.split(",")]
    for r in remotes:
        if not REMOTE.fullmatch(r) or ".." in r.split(":", 1)[1].split("/"):
            raise PolicyError(f"CKCD_COEX_CLUSTER: {r!r} is not an OVSDB remote (tcp:HOST:PORT, ssl:HOST:PORT "
                              "or unix:/PATH)", "CKCD_COEX_CLUSTER")
    return ",".join(remotes)

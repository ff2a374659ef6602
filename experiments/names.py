"""The one rule for a name that becomes a path component or a series name: a scenario's, a case's
or a variant's name (a directory under runs/), a link's (a Flent series), a plan key's parts.

ASCII letters, digits and `_ . + -`, and not only dots (`.` and `..` are directories). Every
reader applies this same rule, so a name the scenario parser takes is one that merge and the
Flent export take too, and a name from a hand-edited file cannot lead out of a directory.
"""

from __future__ import annotations

import os
import re

SAFE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
RULE = "ASCII letters, digits and _ . + - (not only dots)"


def is_safe_name(name) -> bool:
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None and bool(name.strip("."))


def named_file(directory: str, name, suffix: str, what: str) -> str:
    """<directory>/<name><suffix> for a name a scenario gives (a trace, a workload): ValueError for
    a name that is not one, or no such file (the message lists those there). A scenario names
    such files, never paths: the lab runs as root."""
    where = os.path.relpath(directory, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not is_safe_name(name):
        raise ValueError(f"{name!r} is not a {what} name ({RULE}): a file {where}/NAME{suffix}")
    path = os.path.join(directory, f"{name}{suffix}")
    if not os.path.isfile(path):
        known = sorted(f[:-len(suffix)] for f in os.listdir(directory) if f.endswith(suffix))
        raise ValueError(f"no {what} {name!r} in {where} (there: {', '.join(known)})")
    return path

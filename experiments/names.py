"""The one rule for a name that becomes a path component or a series name: a scenario's, a case's
or a variant's name (a directory under runs/), a link's (a Flent series), a plan key's parts.

ASCII letters, digits and `_ . + -`, and not only dots (`.` and `..` are directories). Every
reader applies this same rule, so a name the scenario parser takes is one that merge and the
Flent export take too, and a name from a hand-edited file cannot lead out of a directory.
"""

from __future__ import annotations

import re

SAFE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
RULE = "ASCII letters, digits and _ . + - (not only dots)"


def is_safe_name(name) -> bool:
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None and bool(name.strip("."))

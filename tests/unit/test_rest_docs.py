"""docs/rest.md documents every route the API serves (ryu_app/rest.py ROUTES)."""

from __future__ import annotations

import os
import re

from ryu_app.rest import ROUTES

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "rest.md")


def test_every_route_is_in_the_endpoint_table_and_has_a_curl_example():
    with open(DOC) as f:
        doc = f.read()
    table = "\n".join(line for line in doc.splitlines() if line.startswith("| `"))
    examples = "\n".join(line for line in doc.splitlines() if line.startswith("curl "))
    for method, template, *_ in ROUTES:
        assert re.search(rf"[ /]{re.escape(template)}`", table), f"{method} {template} not in docs/rest.md's table"
        concrete = re.sub(r"\\\{\w+\\\}", r"[^/ ]+", re.escape(template))
        assert re.search(rf"\$API{concrete}(\s|$)", examples), f"{method} {template}: no curl example"

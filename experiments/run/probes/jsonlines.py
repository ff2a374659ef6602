"""What a probe run in a lab host printed: one JSON object per line (shortflows.py, udpflow.py)."""

from __future__ import annotations

import json


def read_rows(path: str) -> list[dict]:
    """The JSON objects of the file's lines, skipping any other line (a traceback, a line cut by the
    kill at the end of the run). OSError when the file cannot be read."""
    with open(path) as f:
        lines = f.read().splitlines()
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows

"""Numbers as the reports and logs print them."""

from __future__ import annotations


def fmt(value, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"

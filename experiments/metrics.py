"""Metrics over flows."""

from __future__ import annotations

from typing import Sequence


def jain_index(rates: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 for equal shares, 1/n for one taker."""
    if not rates:
        raise ValueError("Jain's index of no flows")
    total_sq = sum(x * x for x in rates)
    if total_sq == 0:
        return 1.0  # nobody got anything: equally
    return sum(rates) ** 2 / (len(rates) * total_sq)

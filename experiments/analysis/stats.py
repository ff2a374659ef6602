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


# --- over time and over repeats ------------------------------------------------------------

# Two-sided 95 % quantiles of Student's t distribution, t_{0.975, df}, df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_T975_TAIL = ((40, 2.021), (60, 2.000), (120, 1.980), (float("inf"), 1.960))


def t_critical_95(df: int) -> float:
    """t_{0.975, df}: the half-width factor of a two-sided 95 % confidence interval."""
    if df < 1:
        raise ValueError("a confidence interval needs at least two samples (df >= 1)")
    if df <= 30:
        return _T975[df - 1]
    lo_df, lo_t = 30, _T975[-1]
    for hi_df, hi_t in _T975_TAIL:
        if df <= hi_df:
            if hi_df == float("inf"):
                return hi_t if df > 120 else lo_t
            return lo_t + (hi_t - lo_t) * (df - lo_df) / (hi_df - lo_df)
        lo_df, lo_t = hi_df, hi_t
    return 1.960


def mean_ci95(values: Sequence[float]) -> dict:
    """Mean and the half-width of its 95 % confidence interval (Student's t) over repeats:
    {"mean", "ci95", "n"}; ci95 is None for a single value."""
    vals = [float(v) for v in values if v is not None]
    n = len(vals)
    if n == 0:
        return {"mean": None, "ci95": None, "n": 0}
    mean = sum(vals) / n
    if n == 1:
        return {"mean": mean, "ci95": None, "n": 1}
    var = sum((v - mean) ** 2 for v in vals) / (n - 1)
    return {"mean": mean, "ci95": t_critical_95(n - 1) * (var / n) ** 0.5, "n": n}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    vals = sorted(values)
    if not vals:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    pos = (len(vals) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def in_window(series: Sequence[Sequence[float]], start_s: float, end_s: float) -> list[float]:
    """Values of a [(t, value), ...] series with start_s <= t <= end_s (the warm-up skipped)."""
    return [v for t, v, *_ in series if start_s <= t <= end_s and v is not None]


def window_rate(series: Sequence[Sequence[float]], start_s: float, end_s: float) -> float | None:
    """The time-weighted mean of a [(t, rate, seconds), ...] series in the window: what was carried
    over how long. iperf3's intervals are not all 1 s (the last one of a flow is shorter and may
    hold a burst the receiver read late), so a plain mean of their rates overweights short ones.
    Entries without a length count as equal ones (records written before it was kept)."""
    pairs = [(v, s[0] if s else 1.0) for t, v, *s in series if start_s <= t <= end_s and v is not None]
    seconds = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / seconds if seconds > 0 else None


def counter_rate(series: Sequence[Sequence[float]], start_s: float, end_s: float,
                 min_span_fraction: float = 0.5) -> float | None:
    """The rate of a cumulative counter sampled as [(t, count), ...] over the window: the count's
    growth between its first and last sample in [start_s, end_s] over their time apart. None when
    those samples span less than min_span_fraction of the window (too few to say)."""
    inside = [(t, v) for t, v in series if start_s <= t <= end_s and v is not None]
    if len(inside) < 2:
        return None
    (t0, v0), (t1, v1) = inside[0], inside[-1]
    if t1 - t0 < min_span_fraction * (end_s - start_s) or v1 < v0:
        return None
    return (v1 - v0) / (t1 - t0)

"""Queue discipline specs for ckcd-link with seed 000's Table II parameters.

Table II gives the buffer (80 packets) for all five, Δ = 100 ms and D = 5 ms for CoDel
and CKCD, and the bandwidth (100 Mbit/s) for RED, CHOKe and CKCD. The derived values
follow docs/ckcd.md ("The baselines"): RED/CHOKe min = B/4, max = 3 min, max_p = 0.1,
wlog 9; CKCD's rate_bps and rtt_ms are the emulated link's (its BDP and fair share need
them); CoDel target/interval are D/Δ.
"""

from __future__ import annotations

from typing import Any

from coex.disciplines import DISCIPLINES as CORE_DISCIPLINES
from coex.disciplines import PORT_DISCIPLINES, spec_text
from ovs_config.aqm import AqmSpecError

DISCIPLINES = PORT_DISCIPLINES  # every discipline of datapath/core a port can run

# The parameter names each discipline accepts: the core's own tables (coex.disciplines).
KNOWN_PARAMS = {name: tuple(CORE_DISCIPLINES[name].params) for name in DISCIPLINES}


def table_ii_params(discipline: str, rate_bps: int, rtt_ms: float, buffer_pkts: int) -> dict[str, Any]:
    if discipline == "droptail":
        return {"limit": buffer_pkts}
    if discipline in ("red", "choke", "fred"):  # FRED with RED's thresholds (seed 004)
        low = max(1, buffer_pkts // 4)
        return {"limit": buffer_pkts, "min": low, "max": min(3 * low, buffer_pkts), "max_p": 0.1, "wlog": 9,
                "rate_bps": rate_bps}
    if discipline == "codel":
        return {"limit": buffer_pkts, "target_ms": 5, "interval_ms": 100}
    if discipline == "ckcd":
        return {"limit": buffer_pkts, "delta_ms": 100, "d_ms": 5, "rate_bps": rate_bps, "rtt_ms": rtt_ms}
    if discipline == "cocoa":  # seed 002: the buffer is each flow's initial limit (100, "like in fq")
        return {"flow_limit": buffer_pkts}
    if discipline in DISCIPLINES and "limit" in KNOWN_PARAMS[discipline]:
        return {"limit": buffer_pkts}  # the rest of its parameters: the core's defaults
    raise ValueError(f"unknown discipline {discipline!r} (known: {', '.join(DISCIPLINES)})")


def discipline_spec(discipline: str, rate_bps: int, rtt_ms: float, buffer_pkts: int,
                    overrides: dict[str, Any] | None = None) -> str:
    """The ckcd-link --qdisc spec, e.g. "ckcd limit=80 delta_ms=100 d_ms=5 rate_bps=100000000 rtt_ms=20".
    An override the core's table refuses raises AqmSpecError naming it, as the core would, so
    a scenario names its key; relations between parameters are the core's (check_spec)."""
    params = table_ii_params(discipline, rate_bps, rtt_ms, buffer_pkts)
    for key, value in (overrides or {}).items():
        if key not in KNOWN_PARAMS[discipline]:
            known = " ".join(KNOWN_PARAMS[discipline])
            raise AqmSpecError(f"{discipline} has no parameter {key!r} (known: {known})", key)
        param = CORE_DISCIPLINES[discipline].params[key]
        problem = param.problem(value)
        # A key may name a host pair ("h1>h3"): the runner and ckcd-link resolve it.
        if problem and not (param.unit == "key" and isinstance(value, str) and ">" in value):
            raise AqmSpecError(f"{discipline} {key}: {problem}", key)
        params[key] = value
    return spec_text(discipline, params)

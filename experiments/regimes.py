"""Which discipline to run where: the regime table, generated from the published summaries.

Each regime is one scenario of one published table (experiments/published.py) that stands for a
regime a user asks about: shallow or deep buffer, few or many flows, equal or mixed RTTs, with
or without ECN. For each, the discipline with the best mean in each of three columns (highest
Jain's index, lowest mean queueing delay, highest utilization), and every other discipline whose
95 % confidence interval overlaps the best one's: two intervals that overlap do not tell the two
apart, so the cell names them all rather than crown one on noise. Only cases without a CoEx
approach compete (an approach changes the network, not the discipline). A regime whose table has
no summary yet says so.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Regime:
    label: str      # what a reader recognizes: buffer, flows, RTTs, ECN
    table: str      # the published table
    scenario: str   # its scenario (a grid member's own name)


REGIMES = (
    Regime("shallow buffer (½ BDP), BBR + CUBIC, one RTT", "seed000_disciplines", "bbr_cubic"),
    Regime("shallow buffer (½ BDP), BBR + CUBIC + Reno, one RTT", "seed000_disciplines", "bbr_cubic_reno"),
    Regime("shallow buffer (½ BDP), 15 flows of three controls", "seed000_disciplines", "mixed15"),
    Regime("tiny buffer (0.1 BDP), 10 CUBIC flows, one RTT", "seed004", "seed004_cubic"),
    Regime("tiny buffer (0.1 BDP), 100 CUBIC flows, one RTT", "seed004_100", "seed004_cubic_100"),
    Regime("0.1 BDP, 10 CUBIC flows over RTTs of 134–330 ms", "seed004_paths", "seed004_paths_cubic"),
    Regime("shallow buffer, two BBR flows at 10 and 50 ms", "rtt", "rtt_bbr"),
    Regime("shallow buffer, two CUBIC flows at 10 and 50 ms", "rtt", "rtt_cubic"),
    Regime("deep buffer (1 BDP of the long flow), two BBR flows at 10 and 50 ms", "rtt", "rtt_bbr_deep"),
    Regime("deep buffer (1000 packets, 7.5 BDP), 10 BBR against 10 CUBIC", "hdcodel_bbr", "hdcodel_bbr"),
    Regime("shallow buffer, BBR + CUBIC, CUBIC ECN-capable", "ecn", "ecn_bbr_cubic"),
    Regime("1.5 BDP buffer, DCTCP + CUBIC (classic against scalable)", "dctcp_cubic", "dctcp_cubic"),
    Regime("shallow buffer, BBR + CUBIC with short transfers beside", "short_flows", "short_mix"),
    Regime("1 BDP buffer each way, BBR and CUBIC in both directions", "rrul", "rrul_bbr_cubic"),
)

# (column title, the case summary's key, whether a higher mean is better, digits, scale, unit)
COLUMNS = (("fairest (Jain's index)", "jain", True, 3, 1.0, ""),
           ("shortest queue (mean queueing delay)", "queue_delay_mean_ms", False, 2, 1.0, " ms"),
           ("fullest link (utilization)", "utilization", True, 0, 100.0, " %"))


def best(entries: list[dict], key: str, higher: bool) -> tuple[dict, list[dict]] | None:
    """The case with the best mean of `key`, and the others whose 95 % CI overlaps its one (a
    missing CI counts as zero width); None when no case has the value."""
    have = [e for e in entries if e[key]["mean"] is not None]
    if not have:
        return None
    top = max(have, key=lambda e: e[key]["mean"] if higher else -e[key]["mean"])

    def half(e):
        return e[key]["ci95"] or 0.0
    ties = [e for e in have if e is not top
            and abs(e[key]["mean"] - top[key]["mean"]) <= half(e) + half(top)]
    return top, ties


def _cell(entries: list[dict], key: str, higher: bool, digits: int, scale: float, unit: str) -> str:
    found = best(entries, key, higher)
    if found is None:
        return "n/a"
    top, ties = found
    stat = top[key]
    value = f"{stat['mean'] * scale:.{digits}f}" + (f" ± {stat['ci95'] * scale:.{digits}f}" if stat["ci95"] else "")
    cell = f"{top['case']} {value}{unit}"
    return cell + (f" (within the CIs: {', '.join(e['case'] for e in ties)})" if ties else "")


def render(summaries: dict[str, dict]) -> list[str]:
    """The regime table from the summaries at hand ({table name: summary})."""
    lines = ["| regime | scenario (table) | " + " | ".join(title for title, *_ in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for r in REGIMES:
        summary = summaries.get(r.table)
        where = f"`{r.scenario}` (`{r.table}`)"
        if summary is None:
            lines.append(f"| {r.label} | {where} | " + " | ".join(["not yet run"] * len(COLUMNS)) + " |")
            continue
        entries = [e for e in summary["cases"] if e["scenario"] == r.scenario and e["approach"] == "none"]
        cells = [_cell(entries, key, higher, digits, scale, unit) for _t, key, higher, digits, scale, unit in COLUMNS]
        lines.append(f"| {r.label} | {where} | " + " | ".join(cells) + " |")
    return lines

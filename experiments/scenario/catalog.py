"""Where scenarios come from: TOML files, and the built-in ones under experiments/scenarios/."""

from __future__ import annotations

import os
import tomllib

from experiments.scenario.grid import parse_grid
from experiments.scenario.model import Scenario, ScenarioError
from experiments.scenario.parse import parse_one


SCENARIO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


def parse_scenario(data: dict, source: str | None = None) -> Scenario:
    """A checked Scenario from a scenario document (a parsed TOML file); with a [sweep], also
    every member of its grid, each checked (Scenario.expanded). `source` names the file in
    error messages."""
    if not isinstance(data, dict) or "sweep" not in data:
        return parse_one(data, source)
    return parse_grid(data, source)



def load_scenario(path: str) -> Scenario:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"not valid TOML: {err}", source=path) from None
    except OSError as err:
        raise ScenarioError(f"cannot read: {err.strerror}", source=path) from None
    return parse_scenario(data, source=path)


def builtin_names() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(SCENARIO_DIR) if f.endswith(".toml"))


def resolve(name_or_path: str) -> Scenario:
    """A built-in scenario by name (experiments/scenarios/<name>.toml) or a TOML file path."""
    if os.path.exists(name_or_path):
        return load_scenario(name_or_path)
    path = os.path.join(SCENARIO_DIR, f"{name_or_path}.toml")
    if not os.path.exists(path):
        raise ScenarioError(f"no such scenario file or built-in (built-ins: {', '.join(builtin_names())})",
                            source=name_or_path)
    return load_scenario(path)


# Named groups of built-in scenarios: what `ckcd-coex run GROUP` runs (seed 000 is the default).
GROUPS = {
    "seed000": ["bbr_cubic", "bbr_cubic_reno", "mixed15", "intra_cubic", "intra_bbr"],
    "seed001": ["coex_queues", "coex_queues_paced", "coex_paths"],
    "seed002": ["cocoa_cubic", "cocoa_reno", "cocoa_halve", "cocoa_double"],
    "seed003": ["hdcodel_fair", "hdcodel_p", "hdcodel_bbr"],
    "seed004": ["seed004_newreno", "seed004_sack", "seed004_cubic"],
    "seed004_100": ["seed004_newreno_100", "seed004_sack_100", "seed004_cubic_100"],
}


def select(names: list[str], duration: float | None, repeat: int | None, only: list[str]) -> list[Scenario]:
    """The scenarios `ckcd-coex run` is asked for: built-in names, groups (GROUPS, `all`) or
    TOML files, each grid expanded to its members, with --duration, --repeat and --only applied
    (--only may name members and cases at once)."""
    names = list(names) or GROUPS["seed000"]
    expanded = []
    for n in names:
        if n == "all":
            expanded += [b for b in builtin_names() if b != "demo"]
        else:
            expanded += GROUPS.get(n, [n])
    out = []
    files = [resolve(n) for n in dict.fromkeys(expanded)]
    if duration:
        for sc in files:  # --duration would make the grid's members alike under different names
            if any(key == "duration_s" for key in sc.sweep):
                raise ScenarioError("is swept in the file: --duration would give every member one length",
                                    "sweep.duration_s", sc.name)
    batch = [member for sc in files for member in sc.expanded()]
    # --only may name scenarios (a sweep's members) and cases at once: rerun one case of one
    # member with `--only hdcodel_fair_rtt1ms,codel`.
    scenario_names = {sc.name for sc in batch} & set(only)
    if scenario_names:
        batch = [sc for sc in batch if sc.name in scenario_names]
        only = [o for o in only if o not in scenario_names]
    for sc in batch:
        if duration:
            sc = sc.with_duration(duration)
        if repeat:
            sc.repeat = repeat
        if only:
            sc = sc.restricted(only)
            if sc is None:
                continue
        out.append(sc)
    return out

"""A [sweep]: the scenario expanded to the cartesian product of the swept keys' values, one member
per point, each parsed and checked as a whole scenario; a refusal names `sweep.<key>`."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import re
from typing import Any

from experiments.scenario.model import Scenario, ScenarioError
from experiments.scenario.parse import Table, parse_one


def parse_grid(data: dict, source: str | None = None) -> Scenario:
    """The file's own scenario of a document with a [sweep], with every member of its grid
    built and checked (Scenario.expanded)."""
    base_doc = {k: v for k, v in data.items() if k != "sweep"}
    axes = _sweep_axes(Table(data["sweep"], "sweep", source), base_doc)
    # The file's own scenario: a key that only the grid gives takes its first value.
    own_doc = copy.deepcopy(base_doc)
    for axis in axes:
        if not _has_path(own_doc, axis.path):
            _set_path(own_doc, axis.path, axis.values[0])
    scenario = _parse_in_grid(own_doc, axes, OWN_SCENARIO, source)
    scenario.sweep = {axis.key: list(axis.values) for axis in axes}
    scenario._members = _grid_members(scenario, base_doc, axes, source)
    return scenario


SWEEP_MAX_POINTS = 10_000


OWN_SCENARIO = "the file's own scenario"  # a grid's base: where its errors are the file's own


# Keys that name the scenario or the grid, and `repeat`, which is the batch's (--repeat).
UNSWEEPABLE = ("name", "title", "source", "notes", "sweep", "repeat")


# `[sweep] delay_ms`: the grid's first form (one scenario per one-way delay), still read.
_SWEEP_ALIASES = {"delay_ms": ("link", "delay_ms")}


@dataclasses.dataclass
class SweptKey:
    """One axis of a grid: where in the scenario document (`("flows", 1, "cc")`), its name as
    written (`flows.1.cc`) and its values."""
    path: tuple
    key: str
    values: list

    @property
    def leaf(self) -> str:
        return str(self.path[-1])


def _sweep_axes(st: Table, base_doc: dict) -> list[SweptKey]:
    """The grid's axes in the order written: nested tables are dotted keys (TOML reads
    `link.rate_mbps = [...]` as a table `link`), a number after a list's key is an index."""
    axes: list[SweptKey] = []

    def walk(table: dict, path: tuple, doc):
        for name, value in table.items():
            key = ".".join(str(p) for p in path + (name,))
            segment: Any = name
            if isinstance(doc, list):
                if not name.isdigit() or int(name) >= len(doc):
                    raise ScenarioError(f"{path[-1]} has {len(doc)} entries (0 to {len(doc) - 1}): no entry "
                                        f"{name!r}", f"sweep.{key}", st.source)
                segment = int(name)
            below = doc[segment] if isinstance(doc, list) else doc.get(name) if isinstance(doc, dict) else None
            if isinstance(value, dict):
                walk(value, path + (segment,), below)
            else:
                axes.append(_axis(path + (segment,), key, value, st.source))

    walk(st.data, (), base_doc)
    for i, axis in enumerate(axes):  # `delay_ms` and `link.delay_ms` are one key
        earlier = next((a for a in axes[:i] if a.path == axis.path), None)
        if earlier:
            raise ScenarioError(f"sweeps the same key as sweep.{earlier.key}: give its values once",
                                f"sweep.{axis.key}", st.source)
    if not axes:
        raise ScenarioError("an empty grid sweeps nothing: give a key and its values, or drop [sweep]",
                            "sweep", st.source)
    points = 1
    for axis in axes:
        points *= len(axis.values)
    if points > SWEEP_MAX_POINTS:
        raise ScenarioError(f"{points} points is more than {SWEEP_MAX_POINTS}", "sweep", st.source)
    return axes


def _axis(path: tuple, key: str, values, source: str | None) -> SweptKey:
    where = f"sweep.{key}"
    if path[0] in UNSWEEPABLE:
        raise ScenarioError(f"cannot be swept ({'--repeat sets the runs per case' if path[0] == 'repeat' else 'it names the scenario or the grid'})",
                            where, source)
    if not isinstance(values, list):
        raise ScenarioError(f"expected a list of values, got {type(values).__name__} {values!r}", where, source)
    if not values:
        raise ScenarioError("an empty list sweeps nothing: give at least one value", where, source)
    seen = set()
    for v in values:
        if isinstance(v, (dict, list)):
            hint = f" (sweep {key}.0, {key}.1, ... for its entries)" if isinstance(v, list) else ""
            raise ScenarioError(f"expected plain values (numbers, strings, booleans), got {v!r}{hint}", where, source)
        if isinstance(v, float) and not math.isfinite(v):
            raise ScenarioError(f"{v!r} is not a finite number", where, source)
        marker = (float(v),) if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)
        if marker in seen:  # 1 and 1.0 are one value: they would run alike and get one name
            raise ScenarioError(f"lists {v!r} twice", where, source)
        seen.add(marker)
    return SweptKey(_SWEEP_ALIASES.get(key, path), key, values)


def _grid_members(base: Scenario, base_doc: dict, axes: list[SweptKey], source: str | None) -> list[Scenario]:
    """Every point of the grid as a scenario of its own, parsed and checked like a file."""
    labels = _axis_labels(axes)
    members: list[Scenario] = []
    for point in itertools.product(*(axis.values for axis in axes)):
        doc = copy.deepcopy(base_doc)
        for axis, value in zip(axes, point):
            _set_path(doc, axis.path, value)
        where = "the grid point " + ", ".join(f"{axis.key} = {json.dumps(v)}" for axis, v in zip(axes, point))
        member = _parse_in_grid(doc, axes, where, source)
        member.name = "_".join([base.name] + [label(v) for label, v in zip(labels, point)])
        member.title = ", ".join([base.title] + [_point_title(a, v) for a, v in zip(axes, point)])
        member.grid_point = {axis.key: v for axis, v in zip(axes, point)}
        member.grid = base.name
        members.append(member)
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ScenarioError(f"two points get the name {dup!r}: make the values differ in letters or digits",
                            "sweep", source)
    return members


def _parse_in_grid(doc: dict, axes: list[SweptKey], where: str, source: str | None) -> Scenario:
    """parse_one, with an error at (or around) a swept key named as that key of the grid."""
    try:
        return parse_one(doc, source)
    except ScenarioError as err:
        if not err.key:
            raise
        named = next((a for a in axes if err.key.startswith(_dotted(a.path)) or
                      _dotted(a.path).startswith((err.key + ".", err.key + "["))), None)
        if named is None and where == OWN_SCENARIO:
            raise
        if named is None:
            # A key the grid leaves alone, refused at this point only (the core refusing a RED
            # max that Table II derives from a swept link.buffer_pkts): the point says why.
            raise ScenarioError(f"at {where}: {err.message}", err.key, source) from None
        raise ScenarioError(f"at {where}: {err.key}: {err.message}", f"sweep.{named.key}", source) from None


def _dotted(path: tuple) -> str:
    """("flows", 1, "cc") -> "flows[1].cc", as the parser names keys."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _has_path(doc, path: tuple) -> bool:
    for p in path:
        if isinstance(doc, dict) and p in doc or isinstance(doc, list) and isinstance(p, int) and p < len(doc):
            doc = doc[p]
        else:
            return False
    return True


def _set_path(doc: dict, path: tuple, value) -> None:
    node = doc
    for p in path[:-1]:
        if isinstance(node, dict) and not isinstance(node.get(p), (dict, list)):
            node[p] = {}  # a table the file leaves out, e.g. [discipline_params.ckcd]
        node = node[p]
    node[path[-1]] = value


# How a swept key's value reads in a member's name: the link's keys as one says them, any
# other key as its last part and the value (`cc-reno`, `k200`), the full key when two axes
# end alike (`flows-0-cc-bbr`).
_NAMED = {("link", "delay_ms"): lambda v: f"rtt{_exact(2 * v)}ms",
          ("link", "rate_mbps"): lambda v: f"{_exact(v)}mbit", ("link", "buffer_pkts"): lambda v: f"buf{_exact(v)}"}


def _axis_labels(axes: list[SweptKey]):
    leaves = [a.leaf for a in axes]
    out = []
    for axis in axes:
        if axis.path in _NAMED:
            out.append(_NAMED[axis.path])
            continue
        prefix = axis.leaf if leaves.count(axis.leaf) == 1 else "-".join(str(p) for p in axis.path)
        out.append(lambda v, prefix=prefix: f"{prefix}{_value_label(v)}")
    return out


def _value_label(v) -> str:
    if isinstance(v, bool):
        return "-" + str(v).lower()
    if isinstance(v, (int, float)):
        return _exact(v)
    return "-" + re.sub(r"[^A-Za-z0-9_.-]", "-", str(v))


def _exact(x: float) -> str:
    """A number in a name, every digit kept (0.10000001 is not 0.1): whole numbers without a
    point, others as Python's shortest exact form."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def _point_title(axis: SweptKey, v) -> str:
    if axis.path == ("link", "delay_ms"):
        return f"{_exact(2 * v)} ms RTT"
    return f"{axis.key} = {json.dumps(v)}"

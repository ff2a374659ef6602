"""Declarative experiment scenarios: a TOML file -> a checked `Scenario`.

A scenario names a topology, the emulated bottleneck (rate, delay, buffer), the queue
disciplines and CoEx approaches to compare, and the TCP flows with their congestion
controls and start/stop times. Every (discipline, approach) pair is one *case*; a case
runs `repeat` times. Example (experiments/scenarios/bbr_cubic.toml):

    name = "bbr_cubic"
    title = "One BBR and one CUBIC flow"
    topology = "dumbbell"
    duration_s = 120
    warmup_s = 10
    disciplines = ["droptail", "red", "codel", "choke", "ckcd"]

    [link]
    rate_mbps = 100
    delay_ms = 10
    buffer_pkts = 80

    [[flows]]
    src = "h1"
    dst = "h3"
    cc = "bbr"

A *variant* is a discipline under a name of its own with parameters of its own, so one
scenario can compare two settings of one discipline (seed 003's Static and Dynamic hdcodel):

    disciplines = ["codel", "static", "dynamic"]
    [variants.static]
    discipline = "hdcodel"
    mode = "static"
    heavy_key = "h1>h3"     # a host pair by name: the runner puts in the addresses
    [variants.dynamic]
    discipline = "hdcodel"

A `[sweep]` is a grid: its keys are the scenario's own keys, each with a list of values, and
the scenario is expanded to their cartesian product, one *member* scenario per point, named
after its values (`<name>_100mbit_rtt20ms_cc-reno`); the first key varies slowest:

    [sweep]
    link.rate_mbps = [10, 100]
    link.delay_ms = [5, 10]             # `delay_ms` alone means the same (seed 003's RTT sweep)
    flows.1.cc = ["cubic", "reno"]      # a [[flows]] entry by its index
    discipline_params.ckcd.k = [100, 200]

Each point is checked as a whole scenario when the file is read, so a grid with an unknown key,
an empty list or a value out of range is refused, naming `sweep.<key>`, before anything runs.
That check includes the core's own check of every discipline spec (_check_by_core), so a point
where RED's min is not below its max fails the load, not every run of the case.

Unknown keys and wrong types are refused with a `ScenarioError` that names the key
(`flows[1].cc`), so a typo never silently changes an experiment.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import math
import os
import re
import tomllib
from typing import Any

from experiments.scenario.disciplines import DISCIPLINES, discipline_spec
from experiments.lab.traffic import CONGESTION_CONTROLS
from ovs_config.aqm import AqmBackendError, AqmSpecError, check_spec

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")
TOPOLOGIES = ("dumbbell", "twopaths")
APPROACHES = ("none", "separate_paths", "separate_queues", "limited_queue")
AGGREGATES = ("default", "low_delay", "queue_filling", "penalized")
FIRST_PORT = 5201


class ScenarioError(ValueError):
    """A scenario file is wrong; `key` names the place (`link.rate_mbps`, `flows[2].cc`)."""

    def __init__(self, message: str, key: str | None = None, source: str | None = None):
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{key}: {message}" if key else f"{where}{message}")
        self.message = message
        self.key = key
        self.source = source


@dataclasses.dataclass
class Link:
    rate_bps: int
    delay_ms: float
    buffer_pkts: int
    # ckcd-link's --release-batch: its sender threads wake at most once per this many us and
    # send what is due, so frames leave up to this late (the lateness statistics and the
    # fidelity check count it) for a fraction of the lab's CPU (docs/ckcd-link.md). 0: every
    # frame at its release time.
    release_batch_us: float = 0.0
    # ckcd-link's --release-lateness, a test knob, not a model of a real link: each frame leaves
    # a random time uniform in [0, 2 x this) us after its release, in order, counted as
    # lateness (late_mean_us reads at least this), the rate kept: how much do the results
    # depend on the emulator releasing frames late (docs/ckcd-link.md)? 0: no added lateness.
    release_lateness_us: float = 0.0

    @property
    def rtt_ms(self) -> float:
        return 2 * self.delay_ms

    @property
    def bdp_pkts(self) -> float:
        return self.rate_bps * self.rtt_ms / 1000 / (8 * 1500)


@dataclasses.dataclass
class LinkChange:
    """At `at_s` into the run, the bottleneck link(s) take a new rate and/or delay (ckcd-link's
    set_link, both directions): seed 002's halved or doubled bandwidth (Figs. 4-6)."""
    at_s: float
    rate_bps: int | None = None
    delay_ms: float | None = None


@dataclasses.dataclass
class Flow:
    label: str
    src: str
    dst: str
    cc: str
    start_s: float
    stop_s: float
    port: int
    aggregate: str | None = None
    rate_bps: int | None = None  # iperf3 -b: an application-limited flow
    # ECN-capable (RFC 3168): its sender host asks for ECN (net.ipv4.tcp_ecn=1). A per-host
    # setting in Linux, so every flow of one sender agrees (checked when the file is read).
    ecn: bool = False

    @property
    def duration_s(self) -> float:
        return self.stop_s - self.start_s


@dataclasses.dataclass
class ShortFlows:
    """[[short_flows]]: transfers of fixed sizes from `src` to `dst`, each on a new connection,
    at Poisson (or fixed-interval) arrival times between start_s and stop_s
    (experiments/run/probes/shortflows.py runs them)."""
    label: str
    src: str
    dst: str
    cc: str
    sizes_kb: list[float]
    rate_per_s: float
    poisson: bool
    start_s: float
    stop_s: float
    port: int


@dataclasses.dataclass
class Ping:
    src: str
    dst: str
    interval_s: float
    aggregate: str | None = None


@dataclasses.dataclass
class Case:
    discipline: str
    approach: str

    @property
    def name(self) -> str:
        if self.approach == "none":
            return self.discipline
        return f"{self.approach}" if self.discipline == "droptail" else f"{self.discipline}+{self.approach}"


@dataclasses.dataclass
class Scenario:
    name: str
    title: str
    source: str
    topology: str
    duration_s: float
    warmup_s: float
    link: Link
    disciplines: list[str]
    approaches: list[str]
    flows: list[Flow]
    ping: Ping | None
    discipline_params: dict[str, dict[str, Any]]
    limited_queue_fraction: float
    repeat: int
    notes: str = ""
    link_changes: list[LinkChange] = dataclasses.field(default_factory=list)
    # name -> {"discipline": the core's discipline, its parameters...}: [variants.<name>]
    variants: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # [sweep]: key -> values of the grid this scenario expands to (empty in a member); a member
    # keeps the point it is, key -> value, so its runs say where in the grid they belong
    sweep: dict[str, list] = dataclasses.field(default_factory=dict)
    grid_point: dict[str, Any] = dataclasses.field(default_factory=dict)
    # TCP's SACK on every host (net.ipv4.tcp_sack; false: seed 004's "New Reno" column)
    tcp_sack: bool = True
    # host -> one-way delay (ms) its frames wait before the bottleneck's queue (ckcd-link
    # --host-delay, keyed by the host's address), as on a longer access link: flows with different
    # base RTTs through one bottleneck (seed 004's nine paths)
    access_delay_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    # dumbbell: hosts on each side (h1..hN send, hN+1..h2N receive)
    hosts_per_side: int = 2
    # how often each sending host's TCP state (sRTT, cwnd, min RTT per flow) is read (ss -tin)
    tcp_info_interval_s: float = 0.5
    short_flows: list[ShortFlows] = dataclasses.field(default_factory=list)

    @property
    def hosts(self) -> dict[str, tuple[str, ...]]:
        return _hosts(self.hosts_per_side)

    def base_rtt_ms(self, src: str, dst: str) -> float:
        """The RTT without queueing between two hosts (a flow's, ping's): the link's both ways,
        plus the access delays of the sender (its data) and the receiver (its ACKs)."""
        return self.link.rtt_ms + self.access_delay_ms.get(src, 0.0) + self.access_delay_ms.get(dst, 0.0)

    def cases(self) -> list[Case]:
        return [Case(d, a) for a in self.approaches for d in self.disciplines]

    def overrides(self, discipline: str) -> tuple[str, dict[str, Any]]:
        """The core's discipline a discipline or variant of this scenario runs, and the
        parameters the file gives it: a variant's go over its discipline's [discipline_params]."""
        variant = dict(self.variants.get(discipline, {}))
        base = variant.pop("discipline", discipline)
        return base, {**self.discipline_params.get(base, {}), **variant}

    def qdisc_spec(self, discipline: str) -> str:
        """The ckcd-link spec of a discipline or variant of this scenario."""
        base, params = self.overrides(discipline)
        return discipline_spec(base, self.link.rate_bps, self.link.rtt_ms, self.link.buffer_pkts, params)

    def expanded(self) -> list["Scenario"]:
        """The grid's members, one per point of the [sweep] (itself when nothing is swept).
        They were built and checked when the file was read (parse_scenario)."""
        return list(getattr(self, "_members", None) or [self])

    @property
    def measure_window_s(self) -> tuple[float, float]:
        """[from, to] in seconds since the run started over which means are taken: after the
        last flow joined plus the warm-up (at most a third of what is left), until the first
        flow stops."""
        last_start = max(f.start_s for f in self.flows)
        end = min(f.stop_s for f in self.flows)
        return last_start + min(self.warmup_s, (end - last_start) / 3), end

    def with_duration(self, duration_s: float) -> "Scenario":
        """The same scenario stretched or shrunk to `duration_s`: start/stop times scale, the
        warm-up keeps its length up to a quarter of the run."""
        if duration_s <= 0:
            raise ScenarioError("must be > 0", "duration_s")
        new = copy.deepcopy(self)
        factor = duration_s / self.duration_s
        for f in new.flows:
            f.start_s = round(f.start_s * factor, 3)
            f.stop_s = round(f.stop_s * factor, 3)
        for change in new.link_changes:
            change.at_s = round(change.at_s * factor, 3)
        new.duration_s = duration_s
        new.warmup_s = min(self.warmup_s, duration_s / 4)
        return new

    def restricted(self, only: list[str]) -> "Scenario | None":
        """Keep only the disciplines/approaches/case names in `only` (None if nothing is left)."""
        wanted = set(only)
        new = copy.deepcopy(self)
        if self.name in wanted:
            return new
        cases = [c for c in self.cases() if {c.discipline, c.approach, c.name} & wanted]
        if not cases:
            return None
        new.disciplines = [d for d in self.disciplines if any(c.discipline == d for c in cases)]
        new.approaches = [a for a in self.approaches if any(c.approach == a for c in cases)]
        return new

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Scenario":
        data = dict(data)
        data.pop("sweep_delay_ms", None)  # run records written before grids: a member never had one
        data["link"] = Link(**data["link"])
        data["flows"] = [Flow(**f) for f in data["flows"]]
        data["ping"] = Ping(**data["ping"]) if data.get("ping") else None
        data["link_changes"] = [LinkChange(**c) for c in data.get("link_changes", [])]
        data["short_flows"] = [ShortFlows(**g) for g in data.get("short_flows", [])]
        return cls(**data)


# --- parsing ---------------------------------------------------------------------------------

class _Table:
    """A TOML table being read: every key read is remembered; leftovers are refused."""

    def __init__(self, data: dict, path: str, source: str | None):
        if not isinstance(data, dict):
            raise ScenarioError(f"expected a table, got {type(data).__name__}", path or None, source)
        self.data, self.path, self.source, self.seen = data, path, source, set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, message: str) -> ScenarioError:
        return ScenarioError(message, self.key(name), self.source)

    def get(self, name: str, kind, default=dataclasses.MISSING):
        self.seen.add(name)
        if name not in self.data:
            if default is dataclasses.MISSING:
                raise self.error(name, "missing (required)")
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.error(name, f"expected {names}, got {type(value).__name__} {value!r}")
        return value

    def number(self, name: str, default=dataclasses.MISSING, low: float | None = None,
               high: float | None = None, strict_low: bool = False) -> float:
        value = self.get(name, float, default)
        if value is None:
            return value
        if not math.isfinite(value):  # TOML has nan and inf; every range check passes nan
            raise self.error(name, f"{value!r} is not a finite number")
        if low is not None and (value < low or (strict_low and value == low)):
            raise self.error(name, f"{value:g} is out of range (must be {'>' if strict_low else '>='} {low:g})")
        if high is not None and value > high:
            raise self.error(name, f"{value:g} is out of range (must be <= {high:g})")
        return value

    def choice(self, name: str, allowed, default=dataclasses.MISSING):
        value = self.get(name, str, default)
        if value is not None and value not in allowed:
            raise self.error(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    def table(self, name: str, default=dataclasses.MISSING) -> "_Table | None":
        """The sub-table `name` (None when it is absent and the default is None)."""
        value = self.get(name, dict, default)
        return None if value is None else _Table(value, self.key(name), self.source)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            raise self.error(extra[0], "unknown key (a typo?)")


def _rate_bps(t: _Table, name_mbps: str, name_bps: str, default=dataclasses.MISSING) -> int | None:
    has_mbps, has_bps = name_mbps in t.data, name_bps in t.data
    if has_mbps and has_bps:
        raise t.error(name_bps, f"give either {name_mbps} or {name_bps}, not both")
    if has_bps:
        return int(t.number(name_bps, low=1000, high=1e11))
    if has_mbps or default is dataclasses.MISSING:
        return int(round(t.number(name_mbps, low=0.001, high=1e5) * 1e6))
    t.seen.update({name_mbps, name_bps})
    return default


def parse_scenario(data: dict, source: str | None = None) -> Scenario:
    """A checked Scenario from a scenario document (a parsed TOML file); with a [sweep], also
    every member of its grid, each checked (Scenario.expanded). `source` names the file in
    error messages."""
    if not isinstance(data, dict) or "sweep" not in data:
        return _parse_one(data, source)
    base_doc = {k: v for k, v in data.items() if k != "sweep"}
    axes = _sweep_axes(_Table(data["sweep"], "sweep", source), base_doc)
    # The file's own scenario: a key that only the grid gives takes its first value.
    own_doc = copy.deepcopy(base_doc)
    for axis in axes:
        if not _has_path(own_doc, axis.path):
            _set_path(own_doc, axis.path, axis.values[0])
    scenario = _parse_in_grid(own_doc, axes, OWN_SCENARIO, source)
    scenario.sweep = {axis.key: list(axis.values) for axis in axes}
    scenario._members = _grid_members(scenario, base_doc, axes, source)
    return scenario


def _parse_one(data: dict, source: str | None) -> Scenario:
    """One scenario, no grid. Keys are read, and refused, in the order below."""
    top = _Table(data, "", source)
    name = _scenario_name(top)
    title = top.get("title", str, name)
    src_ref = top.get("source", str, "")
    notes = top.get("notes", str, "")
    topology = top.choice("topology", TOPOLOGIES, "dumbbell")
    duration_s, warmup_s = _run_length(top)
    repeat = int(top.number("repeat", 1, low=1, high=1000))
    link = _link(top.table("link"))
    variants = _variants(top.table("variants", {}))
    disciplines = _names_each_once(top, "disciplines", DISCIPLINES + tuple(variants), "droptail", "discipline")
    approaches = _names_each_once(top, "approaches", APPROACHES, "none", "approach")
    if "separate_paths" in approaches and topology != "twopaths":
        raise top.error("approaches", "separate_paths needs topology = \"twopaths\" (two disjoint paths)")
    params = _discipline_params(top.table("discipline_params", {}))
    fraction = _limited_queue_fraction(top.table("coex", {}))
    per_side = _hosts_per_side(top, topology)
    hosts = _hosts(per_side)
    flows = _flows(top, hosts, duration_s)
    ping = _ping(top.table("ping", None), hosts)
    changes = _link_changes(top, duration_s)
    tcp_sack = top.get("tcp_sack", bool, True)
    access = _access_delay(top.table("access_delay_ms", {}), hosts)
    tcp_info_s = top.number("tcp_info_interval_s", 0.5, low=0.1, high=10)
    short = _short_flows(top, hosts, duration_s)
    top.done()
    scenario = Scenario(name=name, title=title, source=src_ref, topology=topology, duration_s=duration_s,
                        warmup_s=warmup_s, link=link, disciplines=disciplines, approaches=approaches,
                        flows=flows, ping=ping, discipline_params=params,
                        limited_queue_fraction=fraction, repeat=repeat, notes=notes, link_changes=changes,
                        variants={v: variants[v] for v in disciplines if v in variants},
                        tcp_sack=tcp_sack, access_delay_ms=access, hosts_per_side=per_side,
                        tcp_info_interval_s=tcp_info_s, short_flows=short)
    _check_discipline_params(scenario, source)
    if any(a != "none" for a in approaches) and not any(f.aggregate for f in flows):
        raise top.error("flows", "CoEx approaches need flows with an `aggregate` (low_delay, queue_filling)")
    return scenario


def _scenario_name(top: _Table) -> str:
    name = top.get("name", str)
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise top.error("name", f"{name!r}: use letters, digits, '_' and '-' (it names a directory)")
    return name


def _run_length(top: _Table) -> tuple[float, float]:
    """duration_s and warmup_s; the warm-up must leave part of the run to measure."""
    duration_s = top.number("duration_s", low=1, high=86400)
    warmup_s = top.number("warmup_s", 0.0, low=0)
    if warmup_s >= duration_s:
        raise top.error("warmup_s", f"{warmup_s:g} s leaves nothing of a {duration_s:g} s run")
    return duration_s, warmup_s


def _link(lt: _Table) -> Link:
    link = Link(rate_bps=_rate_bps(lt, "rate_mbps", "rate_bps"),
                delay_ms=lt.number("delay_ms", low=0, high=10000),
                buffer_pkts=int(lt.number("buffer_pkts", low=1, high=1_000_000)),
                release_batch_us=lt.number("release_batch_us", 0.0, low=0, high=10000),
                release_lateness_us=lt.number("release_lateness_us", 0.0, low=0, high=10000))
    lt.done()
    return link


def _link_changes(top: _Table, duration_s: float) -> list[LinkChange]:
    """[[link_changes]]: at_s inside the run, in order, each with rate_mbps (or rate_bps) and/or delay_ms."""
    changes = []
    for i, raw in enumerate(top.get("link_changes", list, [])):
        ct = _Table(raw, f"link_changes[{i}]", top.source)
        at_s = ct.number("at_s", low=0, high=duration_s)
        if changes and at_s < changes[-1].at_s:
            raise ct.error("at_s", f"{at_s:g} s comes before the previous change at {changes[-1].at_s:g} s")
        change = LinkChange(at_s, _rate_bps(ct, "rate_mbps", "rate_bps", None),
                            ct.number("delay_ms", None, low=0, high=10000))
        if change.rate_bps is None and change.delay_ms is None:
            raise ct.error("rate_mbps", "a link change needs rate_mbps (or rate_bps) and/or delay_ms")
        ct.done()
        changes.append(change)
    return changes


def _names_each_once(top: _Table, key: str, allowed: tuple[str, ...], default: str, noun: str) -> list[str]:
    """A list of names from `allowed`, at least one, none twice (disciplines, approaches)."""
    names = top.get(key, list, [default])
    for i, n in enumerate(names):
        if n not in allowed:
            raise top.error(f"{key}[{i}]", f"{n!r} is not one of {', '.join(allowed)}")
    if not names or len(set(names)) != len(names):
        raise top.error(key, f"must list at least one {noun}, each once")
    return names


def _discipline_params(pt: _Table) -> dict[str, dict[str, Any]]:
    """[discipline_params.<discipline>] tables of plain values; whether each discipline knows
    them is checked on the whole scenario (_check_discipline_params)."""
    params: dict[str, dict[str, Any]] = {}
    for d in list(pt.data):
        if d not in DISCIPLINES:
            raise pt.error(d, f"{d!r} is not one of {', '.join(DISCIPLINES)}")
        inner = pt.get(d, dict)
        for k, v in inner.items():
            if isinstance(v, (dict, list)) or isinstance(v, bool):
                raise ScenarioError(f"expected a number or string, got {v!r}", f"discipline_params.{d}.{k}",
                                    pt.source)
        params[d] = dict(inner)
    pt.done()
    return params


def _variants(vt: _Table) -> dict[str, dict[str, Any]]:
    """[variants.<name>]: a `discipline` and its parameters (plain values, checked with the
    rest in _check_discipline_params). A name must not hide a discipline."""
    variants: dict[str, dict[str, Any]] = {}
    for name in list(vt.data):
        if name in DISCIPLINES:
            raise vt.error(name, f"{name!r} is a discipline's name; give the variant another")
        if not name.strip(".") or not all(c.isalnum() or c in "_-." for c in name):
            raise vt.error(name, f"{name!r}: use letters, digits, '_', '-' and '.' (it names a directory)")
        inner = _Table(vt.get(name, dict), f"{vt.key(name)}", vt.source)
        variant = {"discipline": inner.choice("discipline", DISCIPLINES)}
        for k, v in inner.data.items():
            if k == "discipline":
                continue
            if isinstance(v, (dict, list)) or isinstance(v, bool):
                raise inner.error(k, f"expected a number or string, got {v!r}")
            variant[k] = v
        variants[name] = variant
    vt.done()
    return variants


# --- grids ([sweep]) --------------------------------------------------------------------------

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


def _sweep_axes(st: _Table, base_doc: dict) -> list[SweptKey]:
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
        members.append(member)
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ScenarioError(f"two points get the name {dup!r}: make the values differ in letters or digits",
                            "sweep", source)
    return members


def _parse_in_grid(doc: dict, axes: list[SweptKey], where: str, source: str | None) -> Scenario:
    """_parse_one, with an error at (or around) a swept key named as that key of the grid."""
    try:
        return _parse_one(doc, source)
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


def _limited_queue_fraction(ct: _Table) -> float:
    fraction = ct.number("limited_queue_fraction", 0.5, low=0.01, high=1)
    ct.done()
    return fraction


def _flows(top: _Table, hosts: dict[str, tuple[str, ...]], duration_s: float) -> list[Flow]:
    """Every [[flows]] entry as `count` flows, each on a port of its own from FIRST_PORT on."""
    raw_flows = top.get("flows", list)
    if not raw_flows:
        raise top.error("flows", "at least one flow is needed")
    flows: list[Flow] = []
    ecn_of_host: dict[str, tuple[bool, int]] = {}  # sender -> (ecn, the first entry that said so)
    for i, raw in enumerate(raw_flows):
        ft = _Table(raw, f"flows[{i}]", top.source)
        entry = _flow_entry(ft, hosts, duration_s, FIRST_PORT + len(flows))
        src, ecn = entry[0].src, entry[0].ecn
        first = ecn_of_host.setdefault(src, (ecn, i))
        if first[0] != ecn:
            raise ft.error("ecn", f"{src} sends flows[{first[1]}] with ecn = {str(first[0]).lower()}: ECN is a "
                                  f"per-host setting in Linux (net.ipv4.tcp_ecn), so all flows of one sender "
                                  f"must agree")
        flows += entry
    _make_labels_unique(flows)
    return flows


def _flow_entry(ft: _Table, hosts: dict[str, tuple[str, ...]], duration_s: float, first_port: int) -> list[Flow]:
    src = ft.choice("src", hosts["senders"])
    dst = ft.choice("dst", hosts["receivers"])
    cc = ft.choice("cc", CONGESTION_CONTROLS)
    count = int(ft.number("count", 1, low=1, high=64))
    start_s, stop_s, every_s = _flow_times(ft, count, duration_s)
    aggregate = ft.choice("aggregate", AGGREGATES, None)
    rate_bps = _rate_bps(ft, "rate_mbps", "rate_bps", None)
    ecn = ft.get("ecn", bool, False)
    label = ft.get("label", str, cc)
    ft.done()
    return [Flow(label=f"{label}{k + 1}" if count > 1 else label, src=src, dst=dst, cc=cc,
                 start_s=start_s + k * every_s, stop_s=stop_s, port=first_port + k, aggregate=aggregate,
                 rate_bps=rate_bps, ecn=ecn)
            for k in range(count)]


def _flow_times(ft: _Table, count: int, duration_s: float) -> tuple[float, float, float]:
    """start_s, stop_s and start_every_s (between the `count` flows of one entry): each flow
    must start before the entry's stop_s, which is within the run."""
    start_s = ft.number("start_s", 0.0, low=0)
    stop_s = ft.number("stop_s", duration_s, low=0, high=duration_s)
    if stop_s <= start_s:
        raise ft.error("stop_s", f"{stop_s:g} is not after start_s {start_s:g}")
    every_s = ft.number("start_every_s", 0.0, low=0)
    if start_s + every_s * (count - 1) >= stop_s:
        raise ft.error("start_every_s", "the last flow would start after it stops")
    return start_s, stop_s, every_s


def _make_labels_unique(flows: list[Flow]) -> None:
    """bbr, cubic, bbr -> bbr-1, cubic, bbr-2."""
    labels = [f.label for f in flows]
    for f in flows:
        if labels.count(f.label) > 1:
            dup = [g for g in flows if g.label == f.label]
            for n, g in enumerate(dup, 1):
                g.label = f"{g.label}-{n}"


SHORT_FIRST_PORT = 6201  # apart from the long flows' iperf3 ports
SHORT_SIZE_KB_MAX = 100_000


def _short_flows(top: _Table, hosts: dict[str, tuple[str, ...]], duration_s: float) -> list[ShortFlows]:
    """[[short_flows]] src, dst, cc, sizes_kb = [50, 1000] (each transfer draws one, uniformly),
    rate_per_s, arrivals = "poisson" | "interval", start_s, stop_s, label."""
    out = []
    for i, raw in enumerate(top.get("short_flows", list, [])):
        st = _Table(raw, f"short_flows[{i}]", top.source)
        src, dst = st.choice("src", hosts["senders"]), st.choice("dst", hosts["receivers"])
        cc = st.choice("cc", CONGESTION_CONTROLS)
        sizes = st.get("sizes_kb", list)
        if not sizes:
            raise st.error("sizes_kb", "at least one size (KB) is needed")
        for k, size in enumerate(sizes):
            if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 < size <= SHORT_SIZE_KB_MAX:
                raise st.error("sizes_kb", f"[{k}] = {size!r} is not a size in KB in (0, {SHORT_SIZE_KB_MAX}]")
        rate = st.number("rate_per_s", low=0.01, high=100)
        arrivals = st.choice("arrivals", ("poisson", "interval"), "poisson")
        start_s = st.number("start_s", 0.0, low=0)
        stop_s = st.number("stop_s", duration_s, low=0, high=duration_s)
        if stop_s <= start_s:
            raise st.error("stop_s", f"{stop_s:g} is not after start_s {start_s:g}")
        label = st.get("label", str, f"short-{cc}-{i + 1}")
        st.done()
        out.append(ShortFlows(label=label, src=src, dst=dst, cc=cc, sizes_kb=[float(x) for x in sizes],
                              rate_per_s=rate, poisson=arrivals == "poisson", start_s=start_s, stop_s=stop_s,
                              port=SHORT_FIRST_PORT + i))
    if len({g.label for g in out}) != len(out):
        raise top.error("short_flows", "labels must differ")
    return out


def _ping(pg: _Table | None, hosts: dict[str, tuple[str, ...]]) -> Ping | None:
    if pg is None:
        return None
    ping = Ping(src=pg.choice("src", hosts["senders"]), dst=pg.choice("dst", hosts["receivers"]),
                interval_s=pg.number("interval_s", 0.2, low=0.002, high=10),
                aggregate=pg.choice("aggregate", AGGREGATES, None))
    pg.done()
    return ping


def _check_discipline_params(scenario: Scenario, source: str | None) -> None:
    """Parameters are checked now, not in the middle of a run: each against the core's table
    as the spec is built, then the whole spec by the core itself (_check_by_core)."""
    hosts = scenario.hosts
    for d in scenario.disciplines:
        where = _param_key(scenario, d, None)
        try:
            spec = scenario.qdisc_spec(d)
        except AqmSpecError as err:
            raise ScenarioError(err.message, _param_key(scenario, d, err.param), source) from None
        for src, dst in HOST_PAIR_RE.findall(spec):
            if src not in hosts["senders"] + hosts["receivers"] or dst not in hosts["senders"] + hosts["receivers"]:
                raise ScenarioError(f"{src}>{dst}: the hosts are {', '.join(hosts['senders'] + hosts['receivers'])}",
                                    where, source)
        _check_by_core(scenario, d, spec, source)


def _check_by_core(scenario: Scenario, discipline: str, spec: str, source: str | None) -> None:
    """The core's own check of a spec (ckcd-replay --describe, as the REST API asks it), at
    every rate the run's link takes (ckcd-link rebuilds a discipline at a link change's rate,
    and refuses the change if the discipline does): what only the core's init knows, RED's
    min below max or CKCD's qmin against its BDP, is refused here, naming the key, instead of
    failing every run of the case."""
    # The runner gives ckcd-link the hosts' addresses, which it turns into a number: the
    # core only ever sees a number there.
    spec = HOST_PAIR_RE.sub("0", spec)
    rates = [scenario.link.rate_bps] + [c.rate_bps for c in scenario.link_changes if c.rate_bps]
    for rate in dict.fromkeys(rates):
        try:
            refusal = _core_refusal(spec, rate)
        except AqmBackendError as err:
            raise ScenarioError(f"the core cannot check it: {err}", _param_key(scenario, discipline, None),
                                source) from None
        if refusal is not None:
            at = "" if rate == scenario.link.rate_bps else f" (at a link change's rate, {rate} bit/s)"
            given = scenario.overrides(discipline)[1]
            # Of the two parameters a conflict is between, name the one the file sets.
            param = refusal.other if refusal.param not in given and refusal.other in given else refusal.param
            raise ScenarioError(refusal.message + at, _param_key(scenario, discipline, param), source)


@functools.lru_cache(maxsize=None)
def _core_refusal(spec: str, rate_bps: int) -> AqmSpecError | None:
    """check_spec once per distinct spec and rate in a process: each is a ckcd-replay
    process, and a grid repeats most of its specs at every point."""
    try:
        check_spec(spec, rate_bps)
    except AqmSpecError as err:
        return err.with_traceback(None)  # kept for the process: not its frames
    return None


def _param_key(scenario: Scenario, discipline: str, param: str | None) -> str:
    """The scenario key that sets (or would set) a parameter of a discipline or variant: the
    variant's own table unless only [discipline_params] sets it; the table itself when no
    parameter is named."""
    variant = scenario.variants.get(discipline)
    if variant is None:
        table = f"discipline_params.{discipline}"
    elif param not in variant and param in scenario.discipline_params.get(variant["discipline"], {}):
        table = f"discipline_params.{variant['discipline']}"
    else:
        table = f"variants.{discipline}"
    return f"{table}.{param}" if param else table


# A host pair named by hosts in a spec value (hdcodel's heavy_key = "h1>h3"): the runner
# puts in their addresses, which ckcd-link turns into the pair's key (docs/hdcodel.md).
HOST_PAIR_RE = re.compile(r"(?<==)([A-Za-z]\w*)>([A-Za-z]\w*)(?=\s|\||$)")


def spec_with_addresses(spec: str, address_of) -> str:
    """The spec with every host pair named by hosts ("h1>h3") given by address_of(host)."""
    return HOST_PAIR_RE.sub(lambda m: f"{address_of(m.group(1))}>{address_of(m.group(2))}", spec)


def _access_delay(at: _Table, hosts: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """[access_delay_ms] h2 = 15: one-way delay (ms) of a host's frames before the bottleneck."""
    known = hosts["senders"] + hosts["receivers"]
    out = {}
    for name in list(at.data):
        if name not in known:
            raise at.error(name, f"not a host of this topology (hosts: {', '.join(known)})")
        out[name] = at.number(name, low=0, high=10000)
    at.done()
    return out


HOSTS_PER_SIDE_MAX = 8


def _hosts_per_side(top: _Table, topology: str) -> int:
    """hosts_per_side = 3: the dumbbell's hosts on each side (seed 004's N1-N3 and N4-N6)."""
    if "hosts_per_side" in top.data and topology != "dumbbell":
        raise top.error("hosts_per_side", "only the dumbbell has a host count (twopaths has two a side)")
    n = top.number("hosts_per_side", 2, low=1, high=HOSTS_PER_SIDE_MAX)
    if n != int(n):
        raise top.error("hosts_per_side", f"{n:g} is not a whole number of hosts")
    return int(n)


def _hosts(per_side: int) -> dict[str, tuple[str, ...]]:
    return {"senders": tuple(f"h{i}" for i in range(1, per_side + 1)),
            "receivers": tuple(f"h{i}" for i in range(per_side + 1, 2 * per_side + 1))}


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

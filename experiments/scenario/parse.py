"""A scenario document (one parsed TOML file, no grid) -> a checked Scenario. Keys are read and
refused in a fixed order; every refusal is a ScenarioError naming the key (`flows[1].cc`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from experiments.lab.mptcp import MAX_SUBFLOWS
from experiments.lab.traffic import BPF_CONGESTION_CONTROLS, CONGESTION_CONTROLS, ECN_CONGESTION_CONTROLS, \
    KERNEL_CONGESTION_CONTROLS
from experiments.names import RULE, is_safe_name
from experiments.scenario.check import check_disciplines
from experiments.scenario.disciplines import DISCIPLINES
from experiments.scenario.link_models import check_loss, trace_average_bps, trace_path
from experiments.scenario.workloads import cdf_path, read_cdf
from experiments.scenario.model import (AGGREGATES, APPROACHES, FIRST_PORT, TOPOLOGIES, Flow, Link, LinkChange, Ping,
                                        ReverseLink, Scenario, ScenarioError, ShortFlows, UdpFlows, hosts_of)


class Table:
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

    def table(self, name: str, default=dataclasses.MISSING) -> "Table | None":
        """The sub-table `name` (None when it is absent and the default is None)."""
        value = self.get(name, dict, default)
        return None if value is None else Table(value, self.key(name), self.source)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            raise self.error(extra[0], "unknown key (a typo?)")


def _rate_bps(t: Table, name_mbps: str, name_bps: str, default=dataclasses.MISSING) -> int | None:
    has_mbps, has_bps = name_mbps in t.data, name_bps in t.data
    if has_mbps and has_bps:
        raise t.error(name_bps, f"give either {name_mbps} or {name_bps}, not both")
    if has_bps:
        return int(t.number(name_bps, low=1000, high=1e11))
    if has_mbps or default is dataclasses.MISSING:
        return int(round(t.number(name_mbps, low=0.001, high=1e5) * 1e6))
    t.seen.update({name_mbps, name_bps})
    return default


def parse_one(data: dict, source: str | None) -> Scenario:
    """One scenario, no grid. Keys are read, and refused, in the order below."""
    top = Table(data, "", source)
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
    hosts = hosts_of(per_side)
    flows = _flows(top, hosts, duration_s)
    ping = _ping(top.table("ping", None), hosts)
    changes = _link_changes(top, duration_s, link)
    tcp_sack = top.get("tcp_sack", bool, True)
    access = _access_delay(top.table("access_delay_ms", {}), hosts)
    tcp_info_s = top.number("tcp_info_interval_s", 0.5, low=0.1, high=10)
    short = _short_flows(top, hosts, duration_s)
    udp = _udp_flows(top, hosts, duration_s)
    top.done()
    scenario = Scenario(name=name, title=title, source=src_ref, topology=topology, duration_s=duration_s,
                        warmup_s=warmup_s, link=link, disciplines=disciplines, approaches=approaches,
                        flows=flows, ping=ping, discipline_params=params,
                        limited_queue_fraction=fraction, repeat=repeat, notes=notes, link_changes=changes,
                        variants={v: variants[v] for v in disciplines if v in variants},
                        tcp_sack=tcp_sack, access_delay_ms=access, hosts_per_side=per_side,
                        tcp_info_interval_s=tcp_info_s, short_flows=short, udp_flows=udp)
    check_disciplines(scenario, source)
    if any(a != "none" for a in approaches) and not any(f.aggregate for f in flows):
        raise top.error("flows", "CoEx approaches need flows with an `aggregate` (low_delay, queue_filling)")
    return scenario


def _scenario_name(top: Table) -> str:
    name = top.get("name", str)
    if not is_safe_name(name):
        raise top.error("name", f"{name!r}: use {RULE} (it names a directory)")
    return name


def _run_length(top: Table) -> tuple[float, float]:
    """duration_s and warmup_s; the warm-up must leave part of the run to measure."""
    duration_s = top.number("duration_s", low=1, high=86400)
    warmup_s = top.number("warmup_s", 0.0, low=0)
    if warmup_s >= duration_s:
        raise top.error("warmup_s", f"{warmup_s:g} s leaves nothing of a {duration_s:g} s run")
    return duration_s, warmup_s


def _link(lt: Table) -> Link:
    trace = _trace(lt)
    if trace is not None and ("rate_mbps" in lt.data or "rate_bps" in lt.data):
        raise lt.error("rate_mbps", f"the link follows trace {trace[0]!r} (its average, {trace[1] / 1e6:.2f} "
                                    "Mbit/s, is its rate): leave rate_mbps out")
    link = Link(rate_bps=round(trace[1]) if trace else _rate_bps(lt, "rate_mbps", "rate_bps"),
                delay_ms=lt.number("delay_ms", low=0, high=10000),
                buffer_pkts=int(lt.number("buffer_pkts", low=1, high=1_000_000)),
                release_batch_us=lt.number("release_batch_us", 0.0, low=0, high=10000),
                release_lateness_us=lt.number("release_lateness_us", 0.0, low=0, high=10000),
                trace=trace[0] if trace else None, loss=_loss(lt))
    link.capture, link.capture_snaplen = _capture(lt)
    link.reverse = _reverse_link(lt.table("reverse", None))
    lt.done()
    return link


def _capture(lt: Table) -> tuple[bool, int]:
    """capture and capture_snaplen (ckcd-link's --snaplen, 64..65535 bytes)."""
    capture = lt.get("capture", bool, False)
    snaplen = lt.get("capture_snaplen", int, 128)
    if "capture_snaplen" in lt.data and not capture:
        raise lt.error("capture_snaplen", "only with capture = true")
    if not 64 <= snaplen <= 65535:
        raise lt.error("capture_snaplen", f"{snaplen} is out of range (64..65535 bytes)")
    return capture, snaplen


def _trace(t: Table) -> tuple[str, float] | None:
    """`trace`: (its name, its average bit/s), checked as ckcd-link reads it, or None."""
    name = t.get("trace", str, None)
    if name is None:
        return None
    try:
        return name, trace_average_bps(trace_path(name))
    except (ValueError, OSError) as err:
        raise t.error("trace", str(err)) from None


def _loss(t: Table) -> str | None:
    spec = t.get("loss", str, None)
    try:
        return None if spec is None else check_loss(spec)
    except ValueError as err:
        raise t.error("loss", str(err)) from None


def _reverse_link(rt: Table | None) -> ReverseLink:
    """[link.reverse]: the receivers' direction where it differs (an asymmetric access link)."""
    if rt is None:
        return ReverseLink()
    trace = _trace(rt)
    if trace is not None and ("rate_mbps" in rt.data or "rate_bps" in rt.data):
        raise rt.error("rate_mbps", f"this direction follows trace {trace[0]!r}: leave rate_mbps out")
    reverse = ReverseLink(rate_bps=None if trace else _rate_bps(rt, "rate_mbps", "rate_bps", None),
                          delay_ms=rt.number("delay_ms", None, low=0, high=10000),
                          buffer_pkts=None if "buffer_pkts" not in rt.data else
                          int(rt.number("buffer_pkts", low=1, high=1_000_000)),
                          trace=trace[0] if trace else None, loss=_loss(rt))
    rt.done()
    return reverse


def _link_changes(top: Table, duration_s: float, link: Link) -> list[LinkChange]:
    """[[link_changes]]: at_s inside the run, in order, each with rate_mbps (or rate_bps) and/or delay_ms."""
    changes = []
    for i, raw in enumerate(top.get("link_changes", list, [])):
        ct = Table(raw, f"link_changes[{i}]", top.source)
        at_s = ct.number("at_s", low=0, high=duration_s)
        if changes and at_s < changes[-1].at_s:
            raise ct.error("at_s", f"{at_s:g} s comes before the previous change at {changes[-1].at_s:g} s")
        change = LinkChange(at_s, _rate_bps(ct, "rate_mbps", "rate_bps", None),
                            ct.number("delay_ms", None, low=0, high=10000))
        if change.rate_bps is None and change.delay_ms is None:
            raise ct.error("rate_mbps", "a link change needs rate_mbps (or rate_bps) and/or delay_ms")
        if change.rate_bps is not None and (link.trace or link.reverse.trace):
            raise ct.error("rate_mbps", "the link follows a trace, whose rate is its own: change delay_ms only")
        ct.done()
        changes.append(change)
    return changes


def _names_each_once(top: Table, key: str, allowed: tuple[str, ...], default: str, noun: str) -> list[str]:
    """A list of names from `allowed`, at least one, none twice (disciplines, approaches)."""
    names = top.get(key, list, [default])
    for i, n in enumerate(names):
        if n not in allowed:
            raise top.error(f"{key}[{i}]", f"{n!r} is not one of {', '.join(allowed)}")
    if not names or len(set(names)) != len(names):
        raise top.error(key, f"must list at least one {noun}, each once")
    return names


def _discipline_params(pt: Table) -> dict[str, dict[str, Any]]:
    """[discipline_params.<discipline>] tables of plain values; whether each discipline knows
    them is checked on the whole scenario (check_disciplines)."""
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


def _variants(vt: Table) -> dict[str, dict[str, Any]]:
    """[variants.<name>]: a `discipline` and its parameters (plain values, checked with the
    rest in check_disciplines). A name must not hide a discipline."""
    variants: dict[str, dict[str, Any]] = {}
    for name in list(vt.data):
        if name in DISCIPLINES:
            raise vt.error(name, f"{name!r} is a discipline's name; give the variant another")
        if not is_safe_name(name):
            raise vt.error(name, f"{name!r}: use {RULE} (it names a directory)")
        inner = Table(vt.get(name, dict), f"{vt.key(name)}", vt.source)
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


def _limited_queue_fraction(ct: Table) -> float:
    fraction = ct.number("limited_queue_fraction", 0.5, low=0.01, high=1)
    ct.done()
    return fraction


def _flows(top: Table, hosts: dict[str, tuple[str, ...]], duration_s: float) -> list[Flow]:
    """Every [[flows]] entry as `count` flows, each on a port of its own from FIRST_PORT on."""
    raw_flows = top.get("flows", list)
    if not raw_flows:
        raise top.error("flows", "at least one flow is needed")
    flows: list[Flow] = []
    ecn_of_host: dict[str, tuple[bool, int]] = {}  # sender -> (ecn, the first entry that said so)
    for i, raw in enumerate(raw_flows):
        ft = Table(raw, f"flows[{i}]", top.source)
        entry = _flow_entry(ft, hosts, duration_s, FIRST_PORT + len(flows))
        src, ecn = entry[0].src, entry[0].ecn
        first = ecn_of_host.setdefault(src, (ecn, i))
        if first[0] != ecn:
            raise ft.error("ecn", f"{src} sends flows[{first[1]}] with ecn = {str(first[0]).lower()}: ECN is a "
                                  f"per-host setting in Linux (net.ipv4.tcp_ecn), so all flows of one sender "
                                  f"must agree")
        flows += entry
    _one_default_per_host(flows, top)
    _one_subflow_count_per_host(flows, top)
    _make_labels_unique(flows)
    return flows


def _one_subflow_count_per_host(flows: list[Flow], top: Table) -> None:
    """A sender's extra subflows come from its namespace's MPTCP endpoints, one per extra
    subflow, which every MPTCP connection of that host uses: its MPTCP flows agree on subflows."""
    first: dict[str, Flow] = {}
    for f in flows:
        if not f.mptcp:
            continue
        g = first.setdefault(f.src, f)
        if g.subflows != f.subflows:
            raise top.error("flows", f"{f.label} ({f.subflows} subflows) and {g.label} ({g.subflows}) are both "
                                     f"sent by {f.src}: a host's MPTCP endpoints serve all its MPTCP "
                                     f"connections, so its MPTCP flows must agree on subflows")


def _one_default_per_host(flows: list[Flow], top: Table) -> None:
    """A congestion control that negotiates ECN runs as its hosts' namespace default (the SYN
    must ask for ECN, before iperf3's -C): every flow a host sends or receives then uses it, so
    such a host takes part in no flow of another control."""
    for f in flows:
        if f.cc not in ECN_CONGESTION_CONTROLS:
            continue
        for g in flows:
            shared = {f.src, f.dst} & {g.src, g.dst}
            if g.cc != f.cc and shared:
                raise top.error("flows", f"{g.label} ({g.cc}) and {f.label} ({f.cc}) share host "
                                         f"{sorted(shared)[0]}: {f.cc} is that host's default congestion "
                                         f"control for the run, so its other flows would run it too")


def _flow_entry(ft: Table, hosts: dict[str, tuple[str, ...]], duration_s: float, first_port: int) -> list[Flow]:
    src, dst, reverse = _flow_ends(ft, hosts)
    cc = ft.choice("cc", CONGESTION_CONTROLS)
    count = int(ft.number("count", 1, low=1, high=64))
    start_s, stop_s, every_s = _flow_times(ft, count, duration_s)
    aggregate = ft.choice("aggregate", AGGREGATES, None)
    rate_bps = _rate_bps(ft, "rate_mbps", "rate_bps", None)
    ecn = ft.get("ecn", bool, cc in ECN_CONGESTION_CONTROLS)
    if cc in ECN_CONGESTION_CONTROLS and not ecn:
        raise ft.error("ecn", f"{cc} negotiates ECN itself: its flows are ECN-capable (leave ecn out)")
    label = ft.get("label", str, cc)
    mptcp, subflows, subflow_aggregates = _mptcp(ft, cc, aggregate)
    if subflow_aggregates:
        aggregate = subflow_aggregates[0]
    if reverse:
        why = {"aggregate": "the CoEx approaches act on the forward direction's bottleneck ports",
               "mptcp": "an MPTCP sender's extra interfaces are on the senders' switch"}
        for key, given in (("aggregate", aggregate), ("mptcp", mptcp)):
            if given:
                raise ft.error(key, f"not for a reverse flow ({src} sends to {dst}): {why[key]}")
    ft.done()
    return [Flow(label=f"{label}{k + 1}" if count > 1 else label, src=src, dst=dst, cc=cc,
                 start_s=start_s + k * every_s, stop_s=stop_s, port=first_port + k, aggregate=aggregate,
                 rate_bps=rate_bps, ecn=ecn, mptcp=mptcp, subflows=subflows,
                 subflow_aggregates=subflow_aggregates, reverse=reverse)
            for k in range(count)]


def _flow_ends(ft: Table, hosts: dict[str, tuple[str, ...]]) -> tuple[str, str, bool]:
    """src and dst of a flow, one on each side of the bottleneck; from a receiver-side host to a
    sender-side one, it is a reverse flow."""
    every = hosts["senders"] + hosts["receivers"]
    src, dst = ft.choice("src", every), ft.choice("dst", every)
    reverse = src in hosts["receivers"]
    if (dst in hosts["receivers"]) != (not reverse):
        side = ", ".join(hosts["senders"] if reverse else hosts["receivers"])
        raise ft.error("dst", f"{dst} is on {src}'s side of the bottleneck: a flow from {src} goes to one of {side}")
    return src, dst, reverse


def _mptcp(ft: Table, cc: str, aggregate: str | None) -> tuple[bool, int, list[str] | None]:
    """mptcp, subflows (2 unless said; 2..MAX_SUBFLOWS) and subflow_aggregates (one per subflow,
    the first the flow's own aggregate) of a [[flows]] entry."""
    mptcp = ft.get("mptcp", bool, False)
    if not mptcp:
        for key in ("subflows", "subflow_aggregates"):
            if key in ft.data:
                raise ft.error(key, "only for a multipath flow (mptcp = true)")
        return False, 1, None
    if cc in BPF_CONGESTION_CONTROLS:
        raise ft.error("cc", f"{cc} is loaded as BPF per run; an MPTCP flow takes one of the kernel's "
                             f"({', '.join(KERNEL_CONGESTION_CONTROLS)})")
    subflows = ft.get("subflows", int, 2)
    if not 2 <= subflows <= MAX_SUBFLOWS:
        raise ft.error("subflows", f"{subflows} is out of range (2..{MAX_SUBFLOWS})")
    names = ft.get("subflow_aggregates", list, None)
    if names is None:
        return True, subflows, None
    if len(names) != subflows or any(n not in AGGREGATES for n in names):
        raise ft.error("subflow_aggregates", f"expected {subflows} aggregates (one per subflow) from "
                                             f"{', '.join(AGGREGATES)}, got {names!r}")
    if aggregate is not None and aggregate != names[0]:
        raise ft.error("subflow_aggregates", f"the first subflow's aggregate is the flow's: {names[0]!r} "
                                             f"is not aggregate = {aggregate!r}")
    return True, subflows, list(names)


def _flow_times(ft: Table, count: int, duration_s: float) -> tuple[float, float, float]:
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


def _short_sizes(st: Table) -> tuple[list, str | None, dict | None, float | None]:
    """A group's sizes: exactly one of sizes_kb (a list), size_cdf (a workload's name) and
    size_pareto ({shape, min_kb, max_kb}); size_max_kb caps a distribution. No draw may exceed
    SHORT_SIZE_KB_MAX (a distribution that reaches past it needs size_max_kb)."""
    given = [k for k in ("sizes_kb", "size_cdf", "size_pareto") if k in st.data]
    if len(given) != 1:
        raise st.error("sizes_kb", "give exactly one of sizes_kb, size_cdf and size_pareto")
    max_kb = st.number("size_max_kb", None, low=0.001, high=SHORT_SIZE_KB_MAX)
    if given[0] == "sizes_kb":
        if max_kb is not None:
            raise st.error("size_max_kb", "caps a distribution (size_cdf, size_pareto), not a list of sizes")
        sizes = st.get("sizes_kb", list)
        if not sizes:
            raise st.error("sizes_kb", "at least one size (KB) is needed")
        for k, size in enumerate(sizes):
            if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 < size <= SHORT_SIZE_KB_MAX:
                raise st.error("sizes_kb", f"[{k}] = {size!r} is not a size in KB in (0, {SHORT_SIZE_KB_MAX}]")
        return sizes, None, None, None
    if given[0] == "size_cdf":
        name = st.get("size_cdf", str)
        try:
            largest_kb = read_cdf(cdf_path(name))[-1][0] / 1000
        except (ValueError, OSError) as err:
            raise st.error("size_cdf", str(err)) from None
        if min(largest_kb, max_kb or largest_kb) > SHORT_SIZE_KB_MAX:
            raise st.error("size_max_kb", f"workload {name!r} reaches {largest_kb:g} KB, above the "
                                          f"{SHORT_SIZE_KB_MAX} KB a transfer may be: cap it with size_max_kb")
        return [], name, None, max_kb
    pt = st.table("size_pareto")
    shape = pt.number("shape", low=0.1, high=10)
    low_kb = pt.number("min_kb", low=0.001, high=SHORT_SIZE_KB_MAX)
    high_kb = pt.number("max_kb", low=low_kb, high=SHORT_SIZE_KB_MAX, strict_low=True)
    pt.done()
    return [], None, {"shape": shape, "min_kb": low_kb, "max_kb": high_kb}, max_kb


def _short_flows(top: Table, hosts: dict[str, tuple[str, ...]], duration_s: float) -> list[ShortFlows]:
    """[[short_flows]] src, dst, cc, sizes_kb = [50, 1000] (each transfer draws one, uniformly),
    rate_per_s, arrivals = "poisson" | "interval", start_s, stop_s, label."""
    out = []
    for i, raw in enumerate(top.get("short_flows", list, [])):
        st = Table(raw, f"short_flows[{i}]", top.source)
        src, dst = st.choice("src", hosts["senders"]), st.choice("dst", hosts["receivers"])
        cc = st.choice("cc", CONGESTION_CONTROLS)
        sizes, cdf, pareto, max_kb = _short_sizes(st)
        rate = st.number("rate_per_s", low=0.01, high=100)
        arrivals = st.choice("arrivals", ("poisson", "interval"), "poisson")
        start_s, stop_s = _span(st, duration_s)
        label = st.get("label", str, f"short-{cc}-{i + 1}")
        st.done()
        out.append(ShortFlows(label=label, src=src, dst=dst, cc=cc, sizes_kb=[float(x) for x in sizes],
                              rate_per_s=rate, poisson=arrivals == "poisson", start_s=start_s, stop_s=stop_s,
                              port=SHORT_FIRST_PORT + i, size_cdf=cdf, size_pareto=pareto, size_max_kb=max_kb))
    if len({g.label for g in out}) != len(out):
        raise top.error("short_flows", "labels must differ")
    return out


def _span(t: Table, duration_s: float) -> tuple[float, float]:
    """start_s (0) and stop_s (the run's end) of a group of transfers or a flow, stop after start."""
    start_s = t.number("start_s", 0.0, low=0)
    stop_s = t.number("stop_s", duration_s, low=0, high=duration_s)
    if stop_s <= start_s:
        raise t.error("stop_s", f"{stop_s:g} is not after start_s {start_s:g}")
    return start_s, stop_s


UDP_FIRST_PORT = 7201  # apart from the long flows' and the short flows' ports
UDP_MAX_PPS = 5000     # experiments/run/probes/udpflow.MAX_PPS


def _udp_flows(top: Table, hosts: dict[str, tuple[str, ...]], duration_s: float) -> list[UdpFlows]:
    """[[udp_flows]] src, dst, rate_mbps (or rate_bps), packet_bytes (16..1472, 1200), start_s,
    stop_s, label."""
    out = []
    for i, raw in enumerate(top.get("udp_flows", list, [])):
        ut = Table(raw, f"udp_flows[{i}]", top.source)
        src, dst = ut.choice("src", hosts["senders"]), ut.choice("dst", hosts["receivers"])
        rate = _rate_bps(ut, "rate_mbps", "rate_bps")
        size = int(ut.number("packet_bytes", 1200, low=16, high=1472))
        if rate / (8 * size) > UDP_MAX_PPS:
            raise ut.error("rate_mbps", f"{rate / 1e6:g} Mbit/s in {size}-byte datagrams is over {UDP_MAX_PPS} a "
                                        "second, more than the sender keeps to its schedule: larger packet_bytes")
        start_s, stop_s = _span(ut, duration_s)
        label = ut.get("label", str, f"udp-{i + 1}")
        ut.done()
        out.append(UdpFlows(label=label, src=src, dst=dst, rate_bps=rate, packet_bytes=size, start_s=start_s,
                            stop_s=stop_s, port=UDP_FIRST_PORT + i))
    if len({g.label for g in out}) != len(out):
        raise top.error("udp_flows", "labels must differ")
    return out


def _ping(pg: Table | None, hosts: dict[str, tuple[str, ...]]) -> Ping | None:
    if pg is None:
        return None
    ping = Ping(src=pg.choice("src", hosts["senders"]), dst=pg.choice("dst", hosts["receivers"]),
                interval_s=pg.number("interval_s", 0.2, low=0.002, high=10),
                aggregate=pg.choice("aggregate", AGGREGATES, None),
                per_rtt_group=pg.get("per_rtt_group", bool, False))
    pg.done()
    return ping


def _access_delay(at: Table, hosts: dict[str, tuple[str, ...]]) -> dict[str, float]:
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


def _hosts_per_side(top: Table, topology: str) -> int:
    """hosts_per_side = 3: the dumbbell's hosts on each side (seed 004's N1-N3 and N4-N6)."""
    if "hosts_per_side" in top.data and topology != "dumbbell":
        raise top.error("hosts_per_side", "only the dumbbell has a host count (twopaths has two a side)")
    n = top.number("hosts_per_side", 2, low=1, high=HOSTS_PER_SIDE_MAX)
    if n != int(n):
        raise top.error("hosts_per_side", f"{n:g} is not a whole number of hosts")
    return int(n)

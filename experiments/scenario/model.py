"""Declarative experiment scenarios: what a `Scenario` holds (parse.py reads one from TOML, grid.py
expands a [sweep], check.py has the core check its disciplines, catalog.py finds them).

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
import re
from typing import Any

from experiments.scenario.disciplines import discipline_spec




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
class ReverseLink:
    """[link.reverse]: the direction from the receivers back to the senders (their ACKs, and
    reverse flows), where it differs from the forward one, as on an asymmetric access link.
    None: as the forward direction (rate, delay), or ckcd-link's large default buffer (ACKs are
    not the experiment) and no trace or loss."""
    rate_bps: int | None = None
    delay_ms: float | None = None
    buffer_pkts: int | None = None
    trace: str | None = None   # a name in experiments/traces/ (link_models.trace_path)
    loss: str | None = None    # ckcd-link's --loss spec


@dataclasses.dataclass
class Link:
    rate_bps: int  # with a trace, its average (rounded)
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
    # The forward direction's service follows this trace (a name in experiments/traces/) instead
    # of a fixed rate; random loss after its queue (ckcd-link's --loss spec). docs/ckcd-link.md,
    # "Traces and loss".
    trace: str | None = None
    loss: str | None = None
    reverse: ReverseLink = dataclasses.field(default_factory=ReverseLink)
    # ckcd-link's packet capture of every emulated link (experiments/run/probes/capture.py), the
    # first capture_snaplen bytes of each frame.
    capture: bool = False
    capture_snaplen: int = 128

    @property
    def rtt_ms(self) -> float:
        return self.delay_ms + (self.delay_ms if self.reverse.delay_ms is None else self.reverse.delay_ms)

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
    # Multipath TCP (RFC 8684): the connection runs through mptcpize and opens `subflows`
    # subflows in all, each after the first from an address of its sender's own
    # (experiments/lab/mptcp.py); subflow_aggregates puts each subflow in an aggregate (the
    # first's is the flow's), so that Separate Paths can give each its own path.
    mptcp: bool = False
    subflows: int = 1
    subflow_aggregates: list[str] | None = None
    # Sent from a receiver-side host to a sender-side one, through the link's reverse direction
    # (Flent's rrul loads both): its data shares that queue with the forward flows' ACKs, and its
    # ACKs the forward queue with their data.
    reverse: bool = False

    @property
    def duration_s(self) -> float:
        return self.stop_s - self.start_s


@dataclasses.dataclass
class ShortFlows:
    """[[short_flows]]: transfers from `src` to `dst`, each on a new connection, at Poisson (or
    fixed-interval) arrival times between start_s and stop_s (experiments/run/probes/shortflows.py
    runs them). Their sizes: drawn uniformly from sizes_kb, or from a workload's CDF (size_cdf, a
    name in experiments/workloads/), or a bounded Pareto (size_pareto: shape, min_kb, max_kb);
    size_max_kb caps a distribution's draws (experiments/scenario/workloads.py)."""
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
    size_cdf: str | None = None
    size_pareto: dict | None = None
    size_max_kb: float | None = None

    @property
    def distribution(self) -> bool:
        """Sizes from a distribution (reported by size class), not a list (reported per size)."""
        return not self.sizes_kb


@dataclasses.dataclass
class UdpFlows:
    """[[udp_flows]]: a real-time flow, constant-rate UDP from `src` to `dst` between start_s and
    stop_s (experiments/run/probes/udpflow.py): what a video or game flow feels beside the TCP
    flows, as one-way delay, jitter and loss."""
    label: str
    src: str
    dst: str
    rate_bps: int
    packet_bytes: int  # UDP payload per datagram
    start_s: float
    stop_s: float
    port: int


@dataclasses.dataclass
class Ping:
    src: str
    dst: str
    interval_s: float
    aggregate: str | None = None
    # One more ping for each other base RTT of the forward flows (Scenario.group_pings), so that
    # every RTT group's delay is measured, not the ping pair's alone.
    per_rtt_group: bool = False


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
    grid: str = ""  # a grid member's: the name of the scenario file whose [sweep] made it
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
    udp_flows: list[UdpFlows] = dataclasses.field(default_factory=list)

    @property
    def hosts(self) -> dict[str, tuple[str, ...]]:
        return hosts_of(self.hosts_per_side)

    def base_rtt_ms(self, src: str, dst: str) -> float:
        """The RTT without queueing between two hosts (a flow's, ping's): the link's both ways,
        plus the access delays of the sender (its data) and the receiver (its ACKs)."""
        return self.link.rtt_ms + self.access_delay_ms.get(src, 0.0) + self.access_delay_ms.get(dst, 0.0)

    def group_pings(self) -> list[tuple[str, str]]:
        """With [ping] per_rtt_group: (src, dst) of one ping per base RTT of the forward flows
        other than the ping's own, between the hosts of the first flow with that RTT."""
        if not self.ping or not self.ping.per_rtt_group:
            return []
        seen = {self.base_rtt_ms(self.ping.src, self.ping.dst)}
        pairs = []
        for f in self.flows:
            rtt = self.base_rtt_ms(f.src, f.dst)
            if not f.reverse and rtt not in seen:
                seen.add(rtt)
                pairs.append((f.src, f.dst))
        return pairs

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

    @property
    def has_reverse_flows(self) -> bool:
        return any(f.reverse for f in self.flows)

    @property
    def reverse_rate_bps(self) -> int:
        return self.link.reverse.rate_bps or self.link.rate_bps

    def reverse_qdisc_spec(self, discipline: str) -> str:
        """The reverse direction's spec when flows are sent back: the case's discipline there
        too (a home router's AQM on both directions, as Flent's rrul is run), at that
        direction's rate and buffer ([link.reverse], else the forward's)."""
        base, params = self.overrides(discipline)
        return discipline_spec(base, self.reverse_rate_bps, self.link.rtt_ms,
                               self.link.reverse.buffer_pkts or self.link.buffer_pkts, params)

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
        link = dict(data["link"])
        link["reverse"] = ReverseLink(**link.get("reverse", {}))  # records from before [link.reverse] had none
        data["link"] = Link(**link)
        data["flows"] = [Flow(**f) for f in data["flows"]]
        data["ping"] = Ping(**data["ping"]) if data.get("ping") else None
        data["link_changes"] = [LinkChange(**c) for c in data.get("link_changes", [])]
        data["short_flows"] = [ShortFlows(**g) for g in data.get("short_flows", [])]  # records before size_cdf: lists
        data["udp_flows"] = [UdpFlows(**g) for g in data.get("udp_flows", [])]
        return cls(**data)


# A host pair named by hosts in a spec value (hdcodel's heavy_key = "h1>h3"): the runner
# puts in their addresses, which ckcd-link turns into the pair's key (docs/hdcodel.md).
HOST_PAIR_RE = re.compile(r"(?<==)([A-Za-z]\w*)>([A-Za-z]\w*)(?=\s|\||$)")


def spec_with_addresses(spec: str, address_of) -> str:
    """The spec with every host pair named by hosts ("h1>h3") given by address_of(host)."""
    return HOST_PAIR_RE.sub(lambda m: f"{address_of(m.group(1))}>{address_of(m.group(2))}", spec)


def hosts_of(per_side: int) -> dict[str, tuple[str, ...]]:
    """The dumbbell's senders (h1..hN) and receivers (hN+1..h2N) with N hosts a side."""
    return {"senders": tuple(f"h{i}" for i in range(1, per_side + 1)),
            "receivers": tuple(f"h{i}" for i in range(per_side + 1, 2 * per_side + 1))}

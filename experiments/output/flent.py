"""Flent export: each run of a results directory as one Flent data file (`.flent.gz`).

`export_flent(DIR)` writes, for every `DIR/runs/<scenario>/<case>/rep<N>/run.json`,
`DIR/flent/<scenario>/<case>/rep<N>.flent.gz`: gzip'd JSON in Flent's data format version 4, the
format Flent 2.3.0 writes and reads (its resultset.py), so `flent -i FILE -p PLOT` and
`flent -i FILE -f summary` work on our lab runs. Flent is not needed to export (it is a test
dependency: the tests run the real `flent` on what we write).

Which of Flent's tests a file poses as: **tcp_nup** ("TCP upload - N streams w/ping"). Flent
reads a file by loading the test named in its NAME with the file's TEST_PARAMETERS, and takes
the plots and the series they draw from that test's definition, so a file is only as useful
as the test it names. tcp_nup is N TCP uploads from one side of a path plus an ICMP ping over
it, N given by its `upload_streams` parameter: our runs are N long-lived TCP flows from the
senders (h1, h2, ...) through one bottleneck (ckcd-link, s1 -> s2) to the receivers, with a ping
across the same bottleneck, any N and any mix of congestion controls. The per-stream congestion
control goes where Flent puts it for tcp_nup, its `cc_algos` parameter. The alternatives fit
less: `cubic_bbr` has four uploads and four downloads of fixed names (Cubic/BBR x BE/CS1) and
UDP pings; `rrul` and its kin are bidirectional with DSCP classes; `tcp_upload` has one stream;
`tcp_2up`, `tcp_4up`, ... are tcp_nup with a fixed N; `rtt_fair_var_up` wants a ping per far host.
tcp_nup also includes Flent's mixins for socket stats (TCP RTT and cwnd of each upload), qdisc
stats (a queue's delay, backlog, drops and ECN marks) and CPU stats, which our runs measure too,
so their plots work with our data under Flent's own names.

What a file holds (x: seconds since the run's t0, when the first flow may start, which is T0):

- `TCP upload::1` ... `TCP upload::N`, one per flow in the scenario's order: the receiver's goodput
  (Mbit/s) per iperf3 interval (1 s), each value at its interval's end with its length (`dur`),
  as Flent's netperf runner gives them. Their raw values also carry the flow's `tcp_rtt` (ms) and
  `tcp_cwnd` (packets) from our `ss` sampler (what Flent's socket-stats runner adds), also
  resampled as `TCP upload::K::tcp_rtt` and `::tcp_cwnd`.
- `TCP upload sum`, `TCP upload avg`, `TCP upload fairness`: computed per step over the flows
  that have a value there (sum, mean, Jain's index), as Flent computes them after a run.
- `Ping (ms) ICMP`: the scenario's ping (every 0.2 s), when it has one.
- `qdisc_stats_<link>` (Flent's qdisc-stats series, one per bottleneck link, e.g. `l0`):
  ckcd-link's 100 ms log of the bottleneck direction: `backlog_pkts` (queue length), `delay`
  (mean sojourn of the frames dequeued in the interval, ms), `dropped` and `ecn_mark` (per
  interval, all reasons), `backlog_bytes` only when the record's log has the queue in bytes.
- `cpu_stats_lab`: the lab machine's CPU load (0-1, both cores; Flent's CPU-stats series).

Each series is resampled onto one grid of STEP_SIZE_S (0.2 s, Flent's default step), as Flent's
timeseries aggregator does after a run: between two samples at most MAX_GAP_S (1.2 s) apart the
value is interpolated linearly (Flent reaches up to five steps to the next sample; 1.2 s joins
iperf3's intervals, which end a little over 1 s apart); where the samples on either side are
farther apart, and before a series' first and after its last sample (beyond half a step), it is
None. The raw samples are kept as measured (`raw_values`, at absolute Unix times), which Flent's
plots and statistics read first.

Means: where our run record has the number, a series' MEAN_VALUE (in SERIES_META) is it, over
the run's measurement window (the record's metrics, as the runner computed them): each flow's
goodput, the sum (total), the average per flow, the fairness (Jain's index), ping's RTT, each
link's queueing delay (per frame) and queue length. Flent takes a series' "avg" from MEAN_VALUE
when there is one (as it takes netperf's own mean), so `flent -f summary` shows our report's
numbers; its median and 99th percentile are over all of the run's samples. Given
`--data-cutoff A,B`, Flent computes all three from the raw samples with A < t < B instead: a
flow's samples sit at their intervals' ends, so (W0 + 0.5, W1 + 0.5) gives the intervals our
window [W0, W1] takes by their middle, and ping's (W0, W1) its samples.

Metadata: Flent's own keys (FLENT_KEYS: NAME, TITLE, NOTE, TIME, T0, LENGTH, TOTAL_LENGTH,
STEP_SIZE, HOST, HOSTS, LOCAL_HOST, IP_VERSION, TEST_PARAMETERS, FLENT_VERSION, DATA_FILENAME,
BATCH_*, SERIES_META, FAILED_RUNNERS, ...) and ours, all named CKCD_COEX_*: the top-level ones in
OWN_KEYS, per series in SERIES_META (a flow's CKCD_COEX_LABEL, _SRC, _DST, ...). The batch keys
come from the results directory's batch.json when it has a batch_id (its id and creation time,
every key optional), else from the batch id the record names, else from the directory itself
(its name, and its first run's start as BATCH_TIME); the shards of one batch share a
BATCH_UUID. DATA_FILENAME names a run as Flent's batch files do, `<scenario>-<case>-NN` (the
file on disk is `<scenario>/<case>/rep<N>.flent.gz`), so Flent's combination plots over many
files group a case's reps.
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import json
import math
import os
import uuid
from bisect import bisect_left

from experiments.batch.plan import BatchError, read_batch_file
from experiments.names import RULE, is_safe_name

FLENT_TEST = "tcp_nup"
FLENT_FORMAT_VERSION = 4  # resultset.FILEFORMAT_VERSION of Flent 2.3.0
FLENT_VERSION = "2.3.0"   # the Flent whose format and test definitions the files follow
SUFFIX = ".flent.gz"
STEP_SIZE_S = 0.2
MAX_GAP_S = 6 * STEP_SIZE_S  # iperf3's 1 s intervals (a little over 1 s apart) still join up
CPU_HOST = "lab"
PREFIX = "CKCD_COEX_"
EXPORTER = "ckcd-coex experiments/output/flent.py"

# Our own top-level metadata keys (Flent ignores keys it does not know).
OWN_KEYS = {
    "EXPORTER": "what wrote the file (not Flent: FLENT_VERSION is the format followed)",
    "SCENARIO": "the scenario's name", "SCENARIO_TITLE": "its title",
    "SCENARIO_SPEC": "the scenario as the run record holds it (link, flows, ping, ...)",
    "CASE": "the case's name", "DISCIPLINE": "its discipline", "APPROACH": "its CoEx approach",
    "REP": "the repetition, from 1", "QDISC": "the bottleneck's discipline spec (record['qdisc'])",
    "LINK_SEED": "ckcd-link's random seed of the run", "STARTED": "when the run began (local time)",
    "WINDOW_S": "the measurement window [from, to], seconds since T0",
    "FIDELITY": "whether the run is trusted, and why not", "METRICS": "the run's metrics as recorded",
    "BATCH": "batch.json's batch_id, grid_id, seed, shuffled, shard and created, or null",
    "RECORD_BATCH_ID": "the batch id the run record names, if any",
    "PROVENANCE": "the run record's provenance, if any", "SOURCE": "the run.json, relative to the results directory",
}

# Flent's own top-level keys we write: resultset.RECORDED_SETTINGS of Flent 2.3.0, and what its
# aggregator and its metadata gathering add (T0, SERIES_META, FAILED_RUNNERS, KERNEL_*).
FLENT_KEYS = ("NAME", "HOST", "HOSTS", "TIME", "LOCAL_HOST", "TITLE", "NOTE", "LENGTH", "TOTAL_LENGTH",
              "STEP_SIZE", "TEST_PARAMETERS", "FLENT_VERSION", "IP_VERSION", "BATCH_NAME", "BATCH_TIME",
              "BATCH_TITLE", "BATCH_UUID", "DATA_FILENAME", "HTTP_GETTER_URLLIST", "HTTP_GETTER_DNS",
              "HTTP_GETTER_WORKERS", "T0", "SERIES_META", "FAILED_RUNNERS", "KERNEL_NAME", "KERNEL_RELEASE")

_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://ckcd-coex/flent-export")


def export_flent(results_dir: str, out_dir: str | None = None, log=print) -> list[str]:
    """Write one Flent data file per run record of `results_dir` (module docstring), under
    `out_dir` (default `<results_dir>/flent`) as `<scenario>/<case>/rep<N>.flent.gz`; return the
    paths written. A failed run (an error, no metrics) is skipped and said so. A record whose
    scenario, case or link names could lead out of out_dir (anything but letters, digits and
    `_-.+`, or only dots) is refused with ValueError before anything is written."""
    if out_dir is None:
        out_dir = os.path.join(results_dir, "flent")
    runs_root = os.path.join(results_dir, "runs")
    plan = []
    targets: dict[str, str] = {}
    for source in _run_files(runs_root):
        rel = os.path.relpath(source, results_dir)
        record = _read_record(source, rel, log)
        if record is None:
            continue
        scenario, case, rep = _names(record, rel)
        for link_name in record.get("links") or {}:
            check_name(link_name, f"{rel}: link name")  # it names a Flent series and test parameter
        target = _target(out_dir, scenario, case, rep)
        if target in targets:
            raise ValueError(f"{rel} and {targets[target]} are both {scenario}/{case} rep {rep}: "
                             f"both would be {target}")
        targets[target] = rel
        plan.append((rel, target, record))
    if not plan:
        log(f"[flent] no run to export under {runs_root}")
        return []
    batch_json = _read_batch_json(results_dir, log)
    first_t0 = min(r["t0_wall"] for _, _, r in plan)
    written = []
    for rel, target, record in plan:
        batch = _batch_keys(batch_json, record, results_dir, first_t0)
        try:
            data = flent_data(record, batch, source=rel)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:  # another shape
            log(f"[flent] {rel}: skipped, not a run record this export can read ({type(err).__name__}: {err})")
            continue
        _write_gzip_json(target, data)
        log(f"[flent] {rel} -> {target}")
        written.append(target)
    return written


# --- finding and checking the runs ------------------------------------------------------------

def _run_files(runs_root: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(runs_root):
        dirnames.sort()
        if "run.json" in filenames:
            found.append(os.path.join(dirpath, "run.json"))
    return sorted(found)


def _read_record(path: str, rel: str, log) -> dict | None:
    """The run record, or None (said why) for one not to export: unreadable, failed, or not a
    record of this runner (no t0_wall)."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as err:
        log(f"[flent] {rel}: skipped, not a readable run record ({err})")
        return None
    if not isinstance(record, dict):
        log(f"[flent] {rel}: skipped, not a run record (not a JSON object)")
        return None
    if record.get("error") or not record.get("metrics"):
        log(f"[flent] {rel}: skipped, the run failed: {record.get('error') or 'no metrics'}")
        return None
    if not isinstance(record.get("t0_wall"), (int, float)):
        log(f"[flent] {rel}: skipped, the record has no t0_wall (when its traffic started)")
        return None
    return record


def check_name(name, what: str) -> str:
    """`name` if it is safe as a single path component and a Flent series name (names.py).
    ValueError otherwise."""
    if not is_safe_name(name):
        raise ValueError(f"{what} {name!r}: refused; a name may hold only {RULE}, since it becomes part of a "
                         f"file path or a Flent series name")
    return name


def _names(record: dict, rel: str) -> tuple[str, str, int]:
    try:
        scenario, case, rep = record["scenario"]["name"], record["case"]["name"], record["rep"]
    except (KeyError, TypeError):
        raise ValueError(f"{rel}: not a run record (no scenario name, case name or rep)") from None
    check_name(scenario, f"{rel}: scenario name")
    check_name(case, f"{rel}: case name")
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
        raise ValueError(f"{rel}: rep {rep!r}: refused; expected a whole number from 1")
    return scenario, case, rep


def _target(out_dir: str, scenario: str, case: str, rep: int) -> str:
    target = os.path.join(out_dir, scenario, case, f"rep{rep}{SUFFIX}")
    root = os.path.realpath(out_dir)
    # the names are checked; this also refuses a symlink in out_dir that points elsewhere
    if os.path.commonpath([root, os.path.realpath(target)]) != root:
        raise ValueError(f"{target}: refused; it is not inside {out_dir}")
    return target


# --- the batch keys -----------------------------------------------------------------------------

def _read_batch_json(results_dir: str, log) -> dict | None:
    """batch.json's keys that we use (BATCH_KEYS), read and checked by the batch module; None
    without a usable file (the batch keys then come from the directory)."""
    try:
        raw = read_batch_file(results_dir)
    except BatchError as err:
        log(f"[flent] not using batch.json: {err}; the batch keys come from the directory")
        return None
    if raw is None:
        return None
    out = {k: raw[k] for k in ("batch_id", "grid_id", "seed", "shuffled", "format")}
    out["shard"] = {"index": raw["shard"]["index"], "count": raw["shard"]["count"]}
    if isinstance(raw.get("created"), str):
        created = _parse_iso(raw["created"])
        if created is None:
            log(f"[flent] {os.path.join(results_dir, 'batch.json')}: its created {raw['created']!r} is not an ISO "
                f"time; BATCH_TIME is the first run's start")
        else:
            out["created"] = raw["created"]
            out["_created_epoch"] = created
    return out


def _parse_iso(text: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 time; one without a zone (batch.json files written
    before it carried its zone) is read as this machine's local time."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.timestamp()  # naive: local time; aware: its own zone


def _batch_keys(batch_json: dict | None, record: dict, results_dir: str, first_t0: float) -> dict:
    """Flent's BATCH_NAME, BATCH_TIME (epoch), BATCH_TITLE, BATCH_UUID, and our CKCD_COEX_BATCH.
    The batch id is batch.json's, else the one the record names; without either the batch is
    the results directory, started by its first run."""
    bj = batch_json or {}
    batch_id = bj.get("batch_id") or (record.get("batch_id") if isinstance(record.get("batch_id"), str) else None)
    dir_name = os.path.basename(os.path.abspath(results_dir))
    when = bj.get("_created_epoch", first_t0)
    if batch_id:
        title = f"ckcd-coex batch {batch_id}" + (f", seed {bj['seed']}" if "seed" in bj else "")
        uid = _as_uuid(batch_id) or str(uuid.uuid5(_UUID_NAMESPACE, f"batch:{batch_id}"))
        name = batch_id
    else:
        title = f"ckcd-coex {dir_name}"
        uid = str(uuid.uuid5(_UUID_NAMESPACE, f"dir:{dir_name}:{first_t0:.6f}"))
        name = dir_name
    own = {k: v for k, v in bj.items() if not k.startswith("_")} if batch_json is not None else None
    return {"BATCH_NAME": name, "BATCH_TIME": when, "BATCH_TITLE": title, "BATCH_UUID": uid,
            PREFIX + "BATCH": own}


def _as_uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


# --- one run as Flent data --------------------------------------------------------------------

@dataclasses.dataclass
class _Series:
    """What a Flent data file holds per series: values on the time grid (results), the raw
    samples (raw_values) and each series' SERIES_META."""
    grid: list[float]
    t0: float
    results: dict[str, list] = dataclasses.field(default_factory=dict)
    raw: dict[str, list] = dataclasses.field(default_factory=dict)
    meta: dict[str, dict] = dataclasses.field(default_factory=dict)

    def add(self, name: str, points, meta: dict) -> None:
        """A series resampled onto the grid from (t since t0, value) points."""
        self.results[name] = resample(points, self.grid)
        self.meta[name] = meta


def flent_data(record: dict, batch: dict | None = None, source: str | None = None) -> dict:
    """One successful run record as the JSON object of a Flent data file (format version 4):
    metadata, x_values, results, raw_values, version. `batch`: _batch_keys' result (default:
    the run alone is the batch)."""
    metrics = record["metrics"]
    t0 = round(float(record["t0_wall"]), 6)  # T0 keeps microseconds: raw t - T0 is exact
    flows = record.get("flows") or []
    links = record.get("links") or {}
    for name in links:
        check_name(name, "link name")
    t_end = _data_end(record)
    series = _Series([round(k * STEP_SIZE_S, 6) for k in range(int(math.floor(t_end / STEP_SIZE_S + 1e-9)) + 1)],
                     t0)
    uploads = _add_uploads(series, flows, metrics.get("flows") or [])
    _add_computed(series, uploads, metrics, len(flows))
    _add_ping(series, record.get("ping") or [], record["scenario"].get("ping") or {}, metrics)
    for link_name, link in links.items():
        _add_link(series, link_name, link, (metrics.get("links") or {}).get(link_name) or {}, record, t_end)
    cpu = _add_cpu(series, record.get("cpu") or [], t_end)
    if batch is None:
        batch = _batch_keys(None, record, ".", t0)
    metadata = _metadata(record, batch, source, series, _test_parameters(flows, list(links), cpu), t_end)
    return {"version": FLENT_FORMAT_VERSION, "metadata": metadata, "x_values": series.grid,
            "results": series.results, "raw_values": series.raw}


def _data_end(record: dict) -> float:
    """The data's end: the run's length, or the last flow or ping sample if later."""
    ends = [float(record["scenario"].get("duration_s") or 0.0)]
    ends += [t + (rest[0] if rest else 1.0) / 2 for f in record.get("flows") or []
             for t, _v, *rest in f.get("goodput") or []]
    ends += [t for t, _v in record.get("ping") or []]
    return max(ends)


def _add_uploads(series: _Series, flows: list[dict], flow_metrics: list[dict]) -> list[str]:
    """Each flow as `TCP upload::k`: its goodput per interval (at the interval's middle), and its
    TCP state from ss; returns the upload series' names."""
    names = []
    for k, f in enumerate(flows, start=1):
        name = f"TCP upload::{k}"
        names.append(name)
        fm = flow_metrics[k - 1] if k - 1 < len(flow_metrics) else {}
        goodput = [(t + (rest[0] if rest else 1.0) / 2, mbps, rest[0] if rest else 1.0)
                   for t, mbps, *rest in f.get("goodput") or [] if mbps is not None]
        rtt, cwnd, tcp_raw = _tcp_state(f)
        series.add(name, [(t, v) for t, v, _d in goodput], {
            "RUNNER": "iperf3", "UNITS": "Mbits/s", "MEAN_VALUE": fm.get("mean_mbps"),
            "CONG_CONTROL": f.get("sender_cc") or f.get("cc"), "TCP_RETRANSMIT": f.get("retransmits"),
            **_own({"LABEL": f.get("label"), "CC": f.get("cc"), "SRC": f.get("src"), "DST": f.get("dst"),
                    "PORT": f.get("port"), "AGGREGATE": f.get("aggregate"), "ECN": f.get("ecn", False),
                    "START_S": f.get("start_s"), "STOP_S": f.get("stop_s"),
                    "RATE_BPS": f.get("rate_bps"), "LAUNCHED_S": f.get("launched_s"),
                    "GOODPUT_WHOLE_FLOW_MBPS": f.get("goodput_total_mbps"),
                    "MIN_RTT_MS": f.get("min_rtt_ms"), "LINK_DROPS": f.get("link_drops"),
                    "LINK_MARKS": f.get("link_marks"), "ERROR": f.get("error")})})
        series.raw[name] = sorted([{"t": series.t0 + t, "val": v, "dur": d} for t, v, d in goodput] +
                                  [dict(row, t=series.t0 + row["t"]) for row in tcp_raw], key=lambda r: r["t"])
        for key, points, units in (("tcp_rtt", rtt, "ms"), ("tcp_cwnd", cwnd, "packets")):
            if points:
                series.add(f"{name}::{key}", points, {"RUNNER": "ss", "UNITS": units})
    return names


def _add_computed(series: _Series, uploads: list[str], metrics: dict, n_flows: int) -> None:
    """What Flent computes from the uploads after a run: their sum, average and fairness."""
    if not uploads:
        return
    per_step = [[series.results[n][i] for n in uploads if series.results[n][i] is not None]
                for i in range(len(series.grid))]
    total = metrics.get("total_mbps")
    for name, fn, units, mean, what in (
            ("TCP upload sum", math.fsum, "Mbits/s", total, "Sum"),
            ("TCP upload avg", lambda v: math.fsum(v) / len(v), "Mbits/s",
             total / n_flows if n_flows and total is not None else None, "Average"),
            ("TCP upload fairness", _jain, "Idx", metrics.get("jain"), "Fairness")):
        series.results[name] = [fn(v) if v else None for v in per_step]
        series.raw[name] = []
        series.meta[name] = {"UNITS": units, "MEAN_VALUE": mean, "COMPUTED_LATE": False,
                             "COMMAND": f"{what} (computed) of TCP upload::1..{len(uploads)}"}


def _add_ping(series: _Series, ping: list, ping_spec: dict, metrics: dict) -> None:
    if not ping:
        return
    name = "Ping (ms) ICMP"
    series.add(name, [(t, v) for t, v in ping if v is not None], {
        "RUNNER": "ping", "UNITS": "ms", "MEAN_VALUE": (metrics.get("rtt_ms") or {}).get("mean"),
        **_own({"SRC": ping_spec.get("src"), "DST": ping_spec.get("dst"), "INTERVAL_S": ping_spec.get("interval_s")})})
    series.raw[name] = [{"t": series.t0 + t, "val": v} for t, v in ping if v is not None]


# Flent's qdisc stats keys -> (our link log's field, units)
_QDISC_KEYS = {"backlog_pkts": ("qlen_pkts", "packets"), "backlog_bytes": ("qlen_bytes", "bytes"),
               "delay": ("sojourn_ms", "ms")}


def _add_link(series: _Series, link_name: str, link: dict, lm: dict, record: dict, t_end: float) -> None:
    """A bottleneck link's queue, as Flent's qdisc stats."""
    name = f"qdisc_stats_{link_name}"
    raw_rows = []
    for r in (r for r in link.get("series") or [] if 0.0 <= r["t"] <= t_end):
        row = {"t": series.t0 + r["t"]}
        row.update({key: r[field] for key, (field, _units) in _QDISC_KEYS.items() if r.get(field) is not None})
        row["dropped"] = sum((r.get("drops") or {}).values())
        row["ecn_mark"] = sum((r.get("marks") or {}).values())
        raw_rows.append(row)
    series.raw[name] = raw_rows
    means = {"delay": (lm.get("queue_delay_ms") or {}).get("mean"), "backlog_pkts": lm.get("qlen_pkts_mean")}
    units = {key: u for key, (_f, u) in _QDISC_KEYS.items()}
    units.update(dropped="packets", ecn_mark="packets")
    for key in ("backlog_pkts", "backlog_bytes", "delay", "dropped", "ecn_mark"):
        points = [(r["t"] - series.t0, r[key]) for r in raw_rows if key in r]
        if points:
            series.add(f"{name}::{key}", points, {"UNITS": units[key], **({"MEAN_VALUE": means[key]}
                                                                          if means.get(key) is not None else {})})
    stats = link.get("stats_ab") or {}
    series.meta[name] = {"RUNNER": "ckcd-link", "UNITS": "misc",
                         **_own({"DIRECTION": "ab", "QDISC": stats.get("qdisc", record.get("qdisc")),
                                 "RATE_BPS": stats.get("rate_bps"), "DELAY_MS": stats.get("delay_ms"),
                                 "LOG_INTERVAL_S": 0.1})}


def _add_cpu(series: _Series, rows: list, t_end: float) -> list:
    """The lab machine's CPU; returns its (t, load) points (none when the run has no samples)."""
    cpu = [(row[0], row[1] / 100.0) for row in rows if row and row[1] is not None and 0.0 <= row[0] <= t_end]
    if cpu:
        name = f"cpu_stats_{CPU_HOST}"
        series.raw[name] = [{"t": series.t0 + t, "load": v} for t, v in cpu]
        series.add(f"{name}::load", cpu, {"UNITS": "misc"})
        series.meta[name] = {"RUNNER": "ckcd-coex cpu sampler", "UNITS": "misc",
                             **_own({"WHAT": "the whole lab machine: every host, vswitchd, ckcd-link"})}
    return cpu


def _test_parameters(flows: list[dict], link_names: list[str], cpu: list) -> dict:
    params = {"upload_streams": str(len(flows)), "cc_algos": ",".join(str(f.get("cc")) for f in flows)}
    if link_names:
        params["qdisc_stats_hosts"] = ",".join(link_names)
        # ckcd-link's bottleneck direction (ab) leaves through <link>-b (ovs_config/bottleneck.py)
        params["qdisc_stats_interfaces"] = ",".join(f"{n}-b" for n in link_names)
    if cpu:
        params["cpu_stats_hosts"] = CPU_HOST
    return params


def _metadata(record: dict, batch: dict, source: str | None, series: _Series, test_parameters: dict,
              t_end: float) -> dict:
    scenario, case, metrics, t0 = record["scenario"], record["case"], record["metrics"], series.t0
    flows = record.get("flows") or []
    ping_spec = scenario.get("ping") or {}
    rep = record["rep"]
    link = scenario.get("link") or {}
    hosts = [str(f.get("dst")) for f in flows]
    length = float(scenario.get("duration_s") or t_end)
    return {
        "NAME": FLENT_TEST,
        "TITLE": f"{scenario['name']}/{case['name']} rep {rep}",
        "NOTE": (f"ckcd-coex lab run: {scenario.get('title') or scenario['name']}; bottleneck "
                 f"{(link.get('rate_bps') or 0) / 1e6:g} Mbit/s, {link.get('delay_ms')} ms one way, "
                 f"{link.get('buffer_pkts')} packets, qdisc '{record.get('qdisc')}'"),
        "TIME": _utc(t0), "T0": _utc(t0),
        "LENGTH": int(length) if length.is_integer() else length,
        "TOTAL_LENGTH": round(series.grid[-1] + STEP_SIZE_S, 6),
        "STEP_SIZE": STEP_SIZE_S,
        "HOST": str(ping_spec.get("dst") or (hosts[0] if hosts else "")),
        "HOSTS": hosts,
        "LOCAL_HOST": str(ping_spec.get("src") or (flows[0].get("src") if flows else "")),
        "IP_VERSION": 4,
        "TEST_PARAMETERS": test_parameters,
        "FLENT_VERSION": FLENT_VERSION,
        "DATA_FILENAME": f"{scenario['name']}-{case['name']}-{rep:02d}{SUFFIX}",
        "BATCH_NAME": batch["BATCH_NAME"], "BATCH_TIME": _utc(batch["BATCH_TIME"]),
        "BATCH_TITLE": batch["BATCH_TITLE"], "BATCH_UUID": batch["BATCH_UUID"],
        "HTTP_GETTER_URLLIST": None, "HTTP_GETTER_DNS": None, "HTTP_GETTER_WORKERS": None,
        "SERIES_META": series.meta,
        "FAILED_RUNNERS": sum(1 for f in flows if f.get("error")),
        **_kernel(record.get("provenance")),
        **_own({"EXPORTER": EXPORTER, "SCENARIO": scenario["name"], "SCENARIO_TITLE": scenario.get("title"),
                "SCENARIO_SPEC": scenario, "CASE": case["name"], "DISCIPLINE": case.get("discipline"),
                "APPROACH": case.get("approach"), "REP": rep, "QDISC": record.get("qdisc"),
                "LINK_SEED": record.get("seed"), "STARTED": record.get("started"),
                "WINDOW_S": metrics.get("window_s"), "FIDELITY": metrics.get("fidelity"), "METRICS": metrics,
                "BATCH": batch.get(PREFIX + "BATCH"), "RECORD_BATCH_ID": record.get("batch_id"),
                "PROVENANCE": record.get("provenance"), "SOURCE": source}),
    }


def _kernel(provenance) -> dict:
    """Flent's KERNEL_NAME and KERNEL_RELEASE, from the record's provenance when it has them."""
    if isinstance(provenance, dict) and isinstance(provenance.get("kernel"), str):
        return {"KERNEL_NAME": "Linux", "KERNEL_RELEASE": provenance["kernel"]}
    return {}


def _own(values: dict) -> dict:
    return {PREFIX + k: v for k, v in values.items()}


def _tcp_state(flow: dict) -> tuple[list, list, list]:
    """A flow's sRTT (ms) and cwnd (packets) over time, and its raw rows ({t, tcp_rtt,
    tcp_cwnd}) as Flent's socket-stats runner gives them: from our ss sampler (tcp_info rows
    [t, sRTT, cwnd, min RTT]), else iperf3's sRTT per interval."""
    rtt, cwnd, rows = [], [], []
    for row in flow.get("tcp_info") or []:
        t, srtt, win = row[0], row[1], row[2]
        entry = {"t": t}
        if srtt is not None:
            rtt.append((t, srtt))
            entry["tcp_rtt"] = srtt
        if win is not None:
            cwnd.append((t, win))
            entry["tcp_cwnd"] = win
        if len(entry) > 1:
            rows.append(entry)
    if not rows:
        for t, srtt in flow.get("srtt") or []:
            if srtt is not None:
                rtt.append((t, srtt))
                rows.append({"t": t, "tcp_rtt": srtt})
    return rtt, cwnd, rows


def _jain(values: list) -> float | None:
    squares = math.fsum(v * v for v in values)
    return math.fsum(values) ** 2 / (len(values) * squares) if squares else None


def resample(points, grid: list[float], max_gap_s: float = MAX_GAP_S, step_s: float = STEP_SIZE_S) -> list:
    """`points` ([(t, value)], any order) at each time of `grid`: a sample's own value where one
    lies on it; the straight line between the samples on either side when they are at most
    max_gap_s apart; else, and before the first or after the last sample, the nearest sample's
    value if it is within half a step, None beyond."""
    pts = sorted(points)
    times = [t for t, _ in pts]
    out = []
    for x in grid:
        i = bisect_left(times, x)
        if i < len(pts) and abs(times[i] - x) < 1e-9:
            out.append(pts[i][1])
            continue
        before = pts[i - 1] if i > 0 else None
        after = pts[i] if i < len(pts) else None
        if before and after and after[0] - before[0] <= max_gap_s:
            share = (x - before[0]) / (after[0] - before[0])
            out.append(before[1] + (after[1] - before[1]) * share)
            continue
        near = [p for p in (before, after) if p and abs(p[0] - x) <= step_s / 2 + 1e-9]
        out.append(min(near, key=lambda p: abs(p[0] - x))[1] if near else None)
    return out


def _utc(epoch: float) -> str:
    """Flent's time format: UTC with microseconds and a Z."""
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_gzip_json(path: str, data: dict) -> None:
    """As Flent writes its files (JSON, keys sorted, indent 2, gzip'd), but reproducibly: the
    gzip header has no time and no name. Written to a temporary file first, then renamed."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False)
    tmp = path + ".tmp"
    with open(tmp, "wb") as raw_file:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw_file, mtime=0) as gz:
            gz.write(text.encode("utf-8"))
    os.replace(tmp, path)

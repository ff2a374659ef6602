"""Flent export (experiments/output/flent.py): a run record as a Flent data file, checked with the
real Flent 2.3.0 (`flent -i FILE -f summary`, `flent -i FILE -p PLOT -o X.png`) and by reading
the file. No root, no lab: the run record is tests/fixtures/run_record/, recorded from a real lab
run (its README says how)."""

from __future__ import annotations

import datetime
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from experiments.output import flent as flent_export
from experiments.output.flent import export_flent, resample

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "run_record")
RUN_JSON = os.path.join("runs", "bbr_cubic", "droptail", "rep1", "run.json")
FLENT = os.path.join(os.path.dirname(sys.executable), "flent")  # the venv's, pinned in requirements/

# Flent's summary prints every number with two decimals: a value we wrote is shown within
# half a unit of the last digit.
PRINTED = 0.005 + 1e-9


@pytest.fixture
def results(tmp_path):
    """A results directory holding the fixture's run, which tests may add to."""
    out = tmp_path / "results"
    shutil.copytree(FIXTURE, out)
    return out


@pytest.fixture(scope="module")
def record():
    with open(os.path.join(FIXTURE, RUN_JSON)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The fixture's run exported once, for the tests that only read it."""
    out = tmp_path_factory.mktemp("flent")
    [path] = export_flent(FIXTURE, str(out), log=lambda _msg: None)
    return path


def load(path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def flent(*args) -> str:
    if not os.access(FLENT, os.X_OK):
        pytest.fail(f"{FLENT} is missing: run `make setup` (requirements/dev.txt, flent==2.3.0 in constraints.txt)")
    done = subprocess.run([FLENT, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"flent {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def summary(path, *extra) -> dict[str, tuple[float, str]]:
    """Flent's summary of a file: series -> (avg, units)."""
    rows = {}
    for line in flent("-i", path, "-f", "summary", *extra).splitlines():
        m = re.match(r"^ (\S.*?)\s+: +(-?[0-9.]+|No data\.)\s+(?:\S+\s+\S+\s+)?(\S+)\s+\d+$", line)
        if m and m.group(2) != "No data.":
            rows[m.group(1)] = (float(m.group(2)), m.group(3))
    return rows


# --- the real Flent reads what we write --------------------------------------------------------

def test_flent_summary_shows_each_flow_with_the_records_means(exported, record):
    rows = summary(exported)
    m = record["metrics"]
    flows = m["flows"]
    assert len(flows) == 2
    for k, f in enumerate(flows, start=1):
        avg, units = rows[f"TCP upload::{k}"]
        assert units == "Mbits/s"
        assert avg == pytest.approx(f["mean_mbps"], abs=PRINTED), f["label"]
        assert f"TCP upload::{k}::tcp_rtt" in rows and f"TCP upload::{k}::tcp_cwnd" in rows
    assert rows["TCP upload sum"][0] == pytest.approx(m["total_mbps"], abs=PRINTED)
    assert rows["TCP upload fairness"][0] == pytest.approx(m["jain"], abs=PRINTED)
    assert rows["Ping (ms) ICMP"] == (pytest.approx(m["rtt_ms"]["mean"], abs=PRINTED), "ms")
    assert rows["qdisc_stats_l0::delay"] == (pytest.approx(m["queue_delay_ms"]["mean"], abs=PRINTED), "ms")
    assert rows["qdisc_stats_l0::backlog_pkts"][1] == "packets"


def test_flent_recomputes_the_window_means_from_our_samples(exported, record):
    """With --data-cutoff Flent ignores MEAN_VALUE and averages the raw samples in the interval:
    from what we wrote it must come to the record's numbers. A goodput sample sits at its 1 s
    interval's end (Flent's netperf convention) and our window takes intervals by their middle,
    so the flows' interval is the window shifted by half a second. Tolerance 0.02 Mbit/s: the
    printed rounding (0.005) plus the difference between our time-weighted mean and Flent's
    plain mean of the intervals (their lengths differ from 1 s by < 0.01 %: < 0.01 Mbit/s).
    Ping: the same samples as the record's window, so only the rounding."""
    w0, w1 = record["metrics"]["window_s"]
    rows = summary(exported, "--data-cutoff", f"{w0 + 0.5},{w1 + 0.5}")
    for k, f in enumerate(record["metrics"]["flows"], start=1):
        assert rows[f"TCP upload::{k}"][0] == pytest.approx(f["mean_mbps"], abs=0.02), f["label"]
    rows = summary(exported, "--data-cutoff", f"{w0},{w1}")
    assert rows["Ping (ms) ICMP"][0] == pytest.approx(record["metrics"]["rtt_ms"]["mean"], abs=PRINTED)


@pytest.mark.parametrize("plot", ["totals", "upload_with_ping", "tcp_rtt", "delay"])
def test_flent_draws_tcp_nup_plots_from_the_file(exported, tmp_path, plot):
    """Plots of tcp_nup itself (totals, upload_with_ping), of its socket-stats mixin (tcp_rtt)
    and of its qdisc-stats mixin (delay). A plot Flent finds no data for still writes a PNG
    (axes, title, a legend): so the PNG must also hold the coloured lines of the data. Measured
    on this run: 4 000-10 000 saturated pixels with the data, at most 48 (legend samples) from
    a copy of the file with every series emptied."""
    import matplotlib.image

    png = tmp_path / f"{plot}.png"
    flent("-i", exported, "-p", plot, "-o", str(png))
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    rgb = matplotlib.image.imread(str(png))[:, :, :3]
    coloured = int(((rgb.max(axis=2) - rgb.min(axis=2)) > 0.25).sum())
    assert coloured > 500, f"{plot}: {coloured} coloured pixels, no data drawn?"


# --- the file ------------------------------------------------------------------------------------

def test_the_file_is_gzip_json_in_flent_format_4(exported, record):
    with open(exported, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    data = load(exported)
    assert data["version"] == 4
    assert set(data) == {"version", "metadata", "x_values", "results", "raw_values"}
    meta = data["metadata"]
    for key in ("NAME", "TITLE", "NOTE", "TIME", "T0", "LENGTH", "TOTAL_LENGTH", "STEP_SIZE", "HOST", "HOSTS",
                "LOCAL_HOST", "IP_VERSION", "TEST_PARAMETERS", "FLENT_VERSION", "DATA_FILENAME", "BATCH_NAME",
                "BATCH_TIME", "BATCH_TITLE", "BATCH_UUID", "SERIES_META", "FAILED_RUNNERS"):
        assert key in meta, key
    assert meta["NAME"] == "tcp_nup"
    assert meta["FLENT_VERSION"] == "2.3.0"
    assert meta["TEST_PARAMETERS"]["upload_streams"] == "2"
    assert meta["TEST_PARAMETERS"]["cc_algos"] == "bbr,cubic"
    assert meta["TEST_PARAMETERS"]["qdisc_stats_hosts"] == "l0"
    assert meta["DATA_FILENAME"] == "bbr_cubic-droptail-01.flent.gz"
    assert meta["HOSTS"] == ["h3", "h4"] and meta["HOST"] == "h3"
    # Flent's time format; T0 is the run's start (its t0: x = 0)
    t0 = datetime.datetime.strptime(meta["T0"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    assert t0.timestamp() == pytest.approx(record["t0_wall"], abs=1e-6)
    datetime.datetime.strptime(meta["BATCH_TIME"], "%Y-%m-%dT%H:%M:%S.%fZ")
    # one x grid of STEP_SIZE for every series, None where there is no sample
    xs = data["x_values"]
    assert meta["STEP_SIZE"] == 0.2 and xs[0] == 0.0
    assert all(abs(b - a - 0.2) < 1e-6 for a, b in zip(xs, xs[1:]))
    assert xs[-1] >= record["scenario"]["duration_s"]
    assert all(len(v) == len(xs) for v in data["results"].values())
    assert data["results"]["TCP upload::1"][0] is None  # the first interval ends at ~1 s
    # series named as tcp_nup names them, and their metadata as Flent reads it
    for name in ("TCP upload::1", "TCP upload::2", "TCP upload sum", "TCP upload avg", "TCP upload fairness",
                 "Ping (ms) ICMP", "qdisc_stats_l0::delay", "qdisc_stats_l0::backlog_pkts"):
        assert name in data["results"], name
    sm = meta["SERIES_META"]
    assert sm["TCP upload::1"]["UNITS"] == "Mbits/s"
    assert sm["TCP upload::1"]["CONG_CONTROL"] == "bbr" and sm["TCP upload::2"]["CONG_CONTROL"] == "cubic"
    assert sm["TCP upload::1"]["CKCD_COEX_LABEL"] == "bbr"
    # raw samples at absolute times, as measured
    raw = data["raw_values"]["TCP upload::1"]
    goodput = [r for r in raw if "val" in r]
    assert len(goodput) == len(record["flows"][0]["goodput"])
    assert any("tcp_rtt" in r and "tcp_cwnd" in r for r in raw)
    assert len(data["raw_values"]["Ping (ms) ICMP"]) == len(record["ping"])
    # ours, under our own prefix
    assert meta["CKCD_COEX_QDISC"] == record["qdisc"] == "droptail limit=80"
    assert (meta["CKCD_COEX_SCENARIO"], meta["CKCD_COEX_CASE"], meta["CKCD_COEX_REP"]) == ("bbr_cubic", "droptail", 1)
    assert meta["CKCD_COEX_METRICS"] == record["metrics"]
    assert meta["CKCD_COEX_SOURCE"] == RUN_JSON
    assert {k for k in meta if k.startswith("CKCD_COEX_")} == {"CKCD_COEX_" + k for k in flent_export.OWN_KEYS}
    assert all(k in flent_export.FLENT_KEYS or k.startswith("CKCD_COEX_") for k in meta), \
        sorted(k for k in meta if k not in flent_export.FLENT_KEYS and not k.startswith("CKCD_COEX_"))


def test_default_out_dir_and_the_files_path(results):
    written = export_flent(str(results), log=lambda _msg: None)
    assert written == [os.path.join(str(results), "flent", "bbr_cubic", "droptail", "rep1.flent.gz")]
    assert os.path.getsize(written[0]) > 0


def test_an_export_is_reproducible(results, tmp_path):
    a = export_flent(str(results), str(tmp_path / "a"), log=lambda _msg: None)
    b = export_flent(str(results), str(tmp_path / "b"), log=lambda _msg: None)
    assert open(a[0], "rb").read() == open(b[0], "rb").read()


# --- what is skipped and what is refused ---------------------------------------------------------------

def _add_run(results, scenario, case, rep, **changes):
    """Another run.json under results, made from the fixture's record."""
    with open(os.path.join(FIXTURE, RUN_JSON)) as f:
        rec = json.load(f)
    rec["scenario"]["name"], rec["case"]["name"], rec["rep"] = scenario, case, rep
    rec.update(changes)
    path = results / "runs" / "added" / f"case{len(list((results / 'runs').rglob('run.json')))}" / "rep1"
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps(rec))
    return path / "run.json"


def test_a_failed_run_is_skipped_with_a_log_line(results, tmp_path):
    _add_run(results, "bbr_cubic", "ckcd", 1, error="RunError: pingall lost 50 % before traffic", metrics=None)
    lines = []
    written = export_flent(str(results), str(tmp_path / "out"), log=lines.append)
    assert written == [str(tmp_path / "out" / "bbr_cubic" / "droptail" / "rep1.flent.gz")]
    [skipped] = [line for line in lines if ": skipped," in line]
    assert skipped.startswith("[flent] runs/added/")
    assert skipped.endswith("skipped, the run failed: RunError: pingall lost 50 % before traffic")
    assert not (tmp_path / "out" / "bbr_cubic" / "ckcd").exists()


@pytest.mark.parametrize("field", ["scenario", "case"])
@pytest.mark.parametrize("name", ["../../evil", "..", ".", "a/b", "/etc", "x\ny", "", "a b", 7, None])
def test_a_hostile_name_is_refused_before_anything_is_written(results, tmp_path, field, name):
    if field == "scenario":
        _add_run(results, name, "ckcd", 1)
    else:
        _add_run(results, "bbr_cubic", name, 1)
    out = tmp_path / "deep" / "out"
    with pytest.raises(ValueError, match=f"{field} name .*refused"):
        export_flent(str(results), str(out), log=lambda _msg: None)
    assert not out.exists() and not (tmp_path / "evil").exists()  # not even the good run was written


def test_a_hostile_link_name_or_rep_is_refused(results, tmp_path):
    path = _add_run(results, "bbr_cubic", "ckcd", 1)
    rec = json.loads(path.read_text())
    rec["links"] = {"../x": rec["links"]["l0"]}
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="link name '../x': refused"):
        export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)
    rec["links"], rec["rep"] = {"l0": rec["links"]["../x"]}, "1/../../x"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="rep '1/../../x': refused"):
        export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)
    assert not (tmp_path / "out").exists()


def test_two_records_of_one_run_are_refused(results, tmp_path):
    _add_run(results, "bbr_cubic", "droptail", 1)  # a copy of the fixture's run elsewhere
    with pytest.raises(ValueError, match="both bbr_cubic/droptail rep 1"):
        export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)


def test_a_record_of_another_shape_is_skipped_and_the_rest_exported(results, tmp_path):
    _add_run(results, "bbr_cubic", "ckcd", 1, flows="garbage")
    lines = []
    written = export_flent(str(results), str(tmp_path / "out"), log=lines.append)
    assert [os.path.relpath(p, tmp_path / "out") for p in written] == ["bbr_cubic/droptail/rep1.flent.gz"]
    assert any(": skipped, not a run record this export can read (AttributeError" in line for line in lines)


def test_no_runs_says_so(tmp_path):
    lines = []
    assert export_flent(str(tmp_path), log=lines.append) == []
    assert lines and "no run to export" in lines[0]


# --- the batch keys ------------------------------------------------------------------------------------

def batch_file(**over) -> str:
    """A batch.json as `ckcd-coex run` writes it (experiments/batch/plan.py), with `over` put in."""
    return json.dumps({"format": 1, "batch_id": "3f2a9c1e77d0", "grid_id": "9a8b", "shuffled": True, "seed": 42,
                       "shard": {"index": 1, "count": 4}, "project": {"commit": "a" * 40},
                       "plan": ["bbr_cubic/droptail/rep1"], "created": "2026-11-25T10:00:00+00:00",
                       "extra": {"x": 1}, **over})


def test_batch_keys_come_from_batch_json(results, tmp_path):
    (results / "batch.json").write_text(batch_file())
    [path] = export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)
    meta = load(path)["metadata"]
    assert meta["BATCH_NAME"] == "3f2a9c1e77d0"
    assert meta["BATCH_TIME"] == "2026-11-25T10:00:00.000000Z"
    assert meta["BATCH_TITLE"] == "ckcd-coex batch 3f2a9c1e77d0, seed 42"
    assert meta["CKCD_COEX_BATCH"] == {"batch_id": "3f2a9c1e77d0", "grid_id": "9a8b", "seed": 42, "shuffled": True,
                                       "format": 1, "shard": {"index": 1, "count": 4},
                                       "created": "2026-11-25T10:00:00+00:00"}
    # every shard of the batch gets the same BATCH_UUID (Flent groups a batch by it)
    other = tmp_path / "shard0"
    shutil.copytree(results, other)
    (other / "batch.json").write_text(batch_file(shard={"index": 0, "count": 4}))
    [path0] = export_flent(str(other), str(tmp_path / "out0"), log=lambda _msg: None)
    assert load(path0)["metadata"]["BATCH_UUID"] == meta["BATCH_UUID"]


def test_a_bad_batch_json_is_not_used(results, tmp_path):
    """A batch.json the batch module refuses (a field missing or of the wrong type) gives no
    batch keys: they come from the directory, the log says why, and the export goes on; a bad
    `created` alone only loses BATCH_TIME."""
    (results / "batch.json").write_text(json.dumps({"seed": "x", "created": "yesterday", "shard": [1, 2]}))
    lines = []
    [path] = export_flent(str(results), str(tmp_path / "out"), log=lines.append)
    meta = load(path)["metadata"]
    assert meta["BATCH_NAME"] == "results"
    assert meta["BATCH_TIME"] == meta["T0"]
    assert meta["CKCD_COEX_BATCH"] is None
    assert any("not using batch.json" in line for line in lines)
    (results / "batch.json").write_text(batch_file(created="yesterday"))
    lines = []
    [path] = export_flent(str(results), str(tmp_path / "out1"), log=lines.append)
    meta = load(path)["metadata"]
    assert meta["BATCH_NAME"] == "3f2a9c1e77d0" and meta["BATCH_TIME"] == meta["T0"]
    assert any("'yesterday' is not an ISO time" in line for line in lines)
    (results / "batch.json").write_text("{not json")
    [path] = export_flent(str(results), str(tmp_path / "out2"), log=lambda _msg: None)
    assert load(path)["metadata"]["BATCH_NAME"] == "results"


def test_batch_keys_without_batch_json_come_from_the_directory(results, tmp_path, exported):
    [path] = export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)
    meta = load(path)["metadata"]
    assert meta["BATCH_NAME"] == "results" and meta["BATCH_TITLE"] == "ckcd-coex results"
    assert meta["BATCH_TIME"] == meta["T0"]  # its first run's start
    assert meta["CKCD_COEX_BATCH"] is None
    # derived from the directory's name and its first run: stable, and distinct from another's
    again = export_flent(str(results), str(tmp_path / "again"), log=lambda _msg: None)
    assert load(again[0])["metadata"]["BATCH_UUID"] == meta["BATCH_UUID"]
    assert load(exported)["metadata"]["BATCH_UUID"] != meta["BATCH_UUID"]  # directory run_record


# --- resampling ------------------------------------------------------------------------------------------

def test_resample_interpolates_between_near_samples_and_leaves_gaps_empty():
    grid = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 3.0, 3.1, 3.2, 3.3, 5.0]
    points = [(1.5, 20.0), (0.5, 10.0), (3.2, 7.0)]  # in any order
    got = resample(points, grid)
    assert got[:3] == [None, None, 10.0]      # before the first sample: only within half a step
    assert got[3:8] == pytest.approx([11.0, 13.0, 15.0, 17.0, 19.0])  # 1 s apart: a straight line
    assert got[8] is None                     # 1.5 and 3.2 are too far apart, neither is near
    assert got[9:12] == [7.0, 7.0, 7.0]       # within half a step of 3.2, on it, and after the last
    assert got[12] is None
    assert resample([], grid) == [None] * len(grid)


def test_a_records_batch_id_and_provenance(results, tmp_path):
    """Records of a batch run name their batch and where they ran (experiments/batch/provenance.py):
    without batch.json the record's batch id is the batch, and its kernel is Flent's."""
    path = results / RUN_JSON
    rec = json.loads(path.read_text())
    rec["batch_id"] = "b7c1"
    rec["provenance"] = {"host": "vm", "kernel": "6.18.44-fc-v669", "project": {"commit": "abc"}}
    path.write_text(json.dumps(rec))
    [out] = export_flent(str(results), str(tmp_path / "out"), log=lambda _msg: None)
    meta = load(out)["metadata"]
    assert (meta["BATCH_NAME"], meta["BATCH_TITLE"]) == ("b7c1", "ckcd-coex batch b7c1")
    assert (meta["KERNEL_NAME"], meta["KERNEL_RELEASE"]) == ("Linux", "6.18.44-fc-v669")
    assert meta["CKCD_COEX_RECORD_BATCH_ID"] == "b7c1"
    assert meta["CKCD_COEX_PROVENANCE"] == rec["provenance"]

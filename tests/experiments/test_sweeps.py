"""Grids, batches, shards, --resume and merge, without a lab: the runner's lab (run_case, the
lab lock, the private OVS) is replaced by a stand-in that writes a run record, so these rules
are checked in the inner loop; tests/cluster runs the same path with real lab runs under Slurm."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import sys

import pytest

from experiments import cli

from experiments.batch import pool

from experiments.batch import records

from experiments.run import case as one_run
from experiments.run import orchestrate as runner
from experiments.batch.plan import BatchError, Shard, declared_order, plan_batch, read_batch_file
from experiments.batch.merge import merge_shards
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import parse_scenario, select

BASE = {"name": "g", "duration_s": 10, "disciplines": ["droptail", "ckcd"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80},
        "flows": [{"src": "h1", "dst": "h3", "cc": "bbr"}, {"src": "h2", "dst": "h4", "cc": "cubic"}]}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = {"commit": "a" * 40, "dirty": False, "diff_sha256": None, "package": "0.1.0"}


def grid(**sweep):
    return parse_scenario({**BASE, "sweep": sweep}, "grid.toml")


# --- grids -------------------------------------------------------------------------------------

def test_a_grid_is_the_cartesian_product_of_its_keys_first_key_slowest():
    sc = grid(link={"rate_mbps": [10, 100], "buffer_pkts": [20, 80]}, flows={"1": {"cc": ["cubic", "reno"]}},
              discipline_params={"ckcd": {"k": [100, 200]}})
    members = sc.expanded()
    assert len(members) == 16
    assert [m.name for m in members[:3]] == ["g_10mbit_buf20_cc-cubic_k100", "g_10mbit_buf20_cc-cubic_k200",
                                             "g_10mbit_buf20_cc-reno_k100"]
    last = members[-1]
    assert last.name == "g_100mbit_buf80_cc-reno_k200"
    assert (last.link.rate_bps, last.link.buffer_pkts, last.flows[1].cc) == (100_000_000, 80, "reno")
    assert "k=200" in last.qdisc_spec("ckcd") and "k=100" in members[0].qdisc_spec("ckcd")
    assert last.grid_point == {"link.rate_mbps": 100, "link.buffer_pkts": 80, "flows.1.cc": "reno",
                               "discipline_params.ckcd.k": 200}
    assert sc.sweep["flows.1.cc"] == ["cubic", "reno"] and last.sweep == {}
    assert sc.link.rate_bps == 50_000_000  # the file's own scenario is left as written


def test_a_flow_count_grid_and_axes_that_end_alike_get_distinct_names():
    sc = grid(flows={"0": {"cc": ["bbr", "cubic"], "count": [1, 4]}, "1": {"cc": ["cubic", "reno"]}})
    names = [m.name for m in sc.expanded()]
    assert names[0] == "g_flows-0-cc-bbr_count1_flows-1-cc-cubic"
    assert len(set(names)) == 8
    assert len(sc.expanded()[-1].flows) == 5  # four of flows[0], one of flows[1]


def test_a_key_only_the_grid_gives_takes_its_first_value_in_the_files_own_scenario():
    doc = {**BASE, "link": {"rate_mbps": 50, "buffer_pkts": 80}, "sweep": {"link": {"delay_ms": [5, 20]}}}
    sc = parse_scenario(doc)
    assert sc.link.delay_ms == 5 and [m.name for m in sc.expanded()] == ["g_rtt10ms", "g_rtt40ms"]


@pytest.mark.parametrize("sweep, key", [
    ({"link": {"rate": [1, 2]}}, "sweep.link.rate"),                         # unknown key
    ({"link": {"rate_mbps": []}}, "sweep.link.rate_mbps"),                   # empty list
    ({"link": {"rate_mbps": 5}}, "sweep.link.rate_mbps"),                    # not a list
    ({"link": {"rate_mbps": [5, 5]}}, "sweep.link.rate_mbps"),               # a value twice
    ({"flows": {"7": {"cc": ["bbr"]}}}, "sweep.flows.7"),                    # no such entry
    ({"flows": {"0": {"cc": ["bbr", "vegas"]}}}, "sweep.flows.0.cc"),        # a bad value at one point
    ({"discipline_params": {"ckcd": {"kay": [1]}}}, "sweep.discipline_params.ckcd.kay"),
    ({"repeat": [1, 2]}, "sweep.repeat"),                                     # the batch's, not the grid's
    ({"name": ["a", "b"]}, "sweep.name"),
    ({}, "sweep"),                                                            # an empty grid
])
def test_a_bad_grid_is_refused_before_anything_runs_naming_its_key(sweep, key):
    with pytest.raises(ScenarioError) as err:
        grid(**sweep)
    assert err.value.key == key and f"grid.toml: {key}:" in str(err.value)


# --- batches and shards ------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["2/2", "-1/2", "1/0", "a/b", "1", "0/"])
def test_a_shard_outside_0_to_n_minus_1_is_an_error(text):
    with pytest.raises(BatchError):
        Shard.parse(text)
    with pytest.raises(SystemExit) as exit_:  # the CLI refuses it before anything, root or not
        cli.main(["run", "bbr_cubic", "--shard", text])
    assert exit_.value.code == 2


def scenarios(repeat=3):
    sc = grid(link={"delay_ms": [5, 10]})
    members = sc.expanded()
    for m in members:
        m.repeat = repeat
    return members


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_partition_one_deterministic_order(count):
    runs = {item.key for item in declared_order(scenarios())}
    parts = [plan_batch(scenarios(), PROJECT, Shard(i, count)).mine() for i in range(count)]
    keys = [item.key for part in parts for item in part]
    assert sorted(keys) == sorted(runs)  # every run of the batch in exactly one shard
    again = plan_batch(scenarios(), PROJECT, Shard(0, count))  # a shard started elsewhere agrees
    assert [i.key for i in again.plan] == [i.key for i in plan_batch(scenarios(), PROJECT, Shard(1 % count, count)).plan]
    assert [i.key for i in parts[0]] == [i.key for i in again.plan[0::count]]


def test_the_order_is_shuffled_by_a_recorded_seed():
    declared = [i.key for i in declared_order(scenarios())]
    default = plan_batch(scenarios(), PROJECT)
    assert default.seed is not None and [i.key for i in default.plan] != declared
    assert [i.key for i in plan_batch(scenarios(), PROJECT, seed=default.seed).plan] == \
        [i.key for i in default.plan]
    assert [i.key for i in plan_batch(scenarios(), PROJECT, seed=7).plan] != [i.key for i in default.plan]
    unshuffled = plan_batch(scenarios(), PROJECT, shuffle=False)
    assert [i.key for i in unshuffled.plan] == declared and unshuffled.seed is None


def test_the_batch_id_changes_with_grid_shards_and_version():
    one = plan_batch(scenarios(), PROJECT, Shard(0, 2))
    assert plan_batch(scenarios(), PROJECT, Shard(1, 2)).batch_id == one.batch_id
    assert plan_batch(scenarios(repeat=2), PROJECT, Shard(0, 2)).grid_id != one.grid_id
    assert plan_batch(scenarios(), PROJECT, Shard(0, 3)).batch_id != one.batch_id
    assert plan_batch(scenarios(), {**PROJECT, "commit": "b" * 40}, Shard(0, 2)).batch_id != one.batch_id


# --- the runner's part: resume -----------------------------------------------------------------

class FakeLab:
    """Stands in for run_case: writes a complete run record, or is interrupted at a given call."""

    def __init__(self, interrupt_at=None):
        self.calls, self.interrupt_at = [], interrupt_at

    def __call__(self, scenario, case, rep, run_dir, progress=None, made_by=None):
        self.calls.append(f"{scenario.name}/{case.name}/rep{rep}")
        if len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        record = {**one_run.failed_record(scenario, case, rep, None), **(made_by or {}),
                  "metrics": {"fidelity": {"trusted": True, "reasons": []}, "jain": 1.0, "total_mbps": 40.0,
                              "queue_delay_ms": {"mean": 1.0}, "rtt_ms": {"mean": 21.0}}}
        records.write_json(os.path.join(run_dir, "run.json"), record)
        return record


@pytest.fixture
def fake_lab(monkeypatch):
    monkeypatch.setattr(runner, "lab_lock", lambda timeout_s: contextlib.nullcontext())
    monkeypatch.setattr(runner, "PrivateOVS", contextlib.nullcontext)
    monkeypatch.setattr(runner.provenance, "collect", lambda: {"project": PROJECT})

    def install(lab):
        monkeypatch.setattr(runner, "run_case", lab)
        return lab
    return install


def run_shard(out, shard, resume=False, sc=None):
    batch = plan_batch(sc or scenarios(), PROJECT, shard)
    return runner.run_batch(batch.scenarios, str(out), log=lambda msg: None, batch=batch, resume=resume)


def test_an_interrupted_shard_resumes_with_the_runs_it_lacks(fake_lab, tmp_path):
    first = fake_lab(FakeLab(interrupt_at=3))
    with pytest.raises(KeyboardInterrupt):
        run_shard(tmp_path, Shard(0, 2))
    done_before = first.calls[:2]
    second = fake_lab(FakeLab())
    records = run_shard(tmp_path, Shard(0, 2), resume=True)
    mine = [i.key for i in plan_batch(scenarios(), PROJECT, Shard(0, 2)).mine()]
    assert sorted(second.calls) == sorted(set(mine) - set(done_before))  # the two complete runs are kept
    # the records come back in the declared order, whatever order they ran in
    declared = [i.key for i in declared_order(scenarios()) if i.key in mine]
    assert [f"{r['scenario']['name']}/{r['case']['name']}/rep{r['rep']}" for r in records] == declared
    assert all(r["batch_id"] == read_batch_file(str(tmp_path))["batch_id"] for r in records)
    third = fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 2), resume=True)
    assert third.calls == []  # nothing left to do


def test_resume_refuses_a_directory_of_another_batch(fake_lab, tmp_path):
    fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 2))
    with pytest.raises(BatchError, match="different grids"):
        run_shard(tmp_path, Shard(0, 2), resume=True, sc=scenarios(repeat=1))
    with pytest.raises(BatchError, match="shard 0/2"):
        run_shard(tmp_path, Shard(1, 2), resume=True)


def test_a_failed_run_is_run_again_on_resume(fake_lab, tmp_path):
    fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 1))
    victim = plan_batch(scenarios(), PROJECT).plan[0].key
    path = tmp_path / "runs" / victim / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "error": "RunError: pingall lost 50 %"}))
    again = fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 1), resume=True)
    assert again.calls == [victim]


# --- merge -------------------------------------------------------------------------------------

@pytest.fixture
def two_shards(fake_lab, tmp_path):
    fake_lab(FakeLab())
    dirs = [tmp_path / f"shard{i}" for i in range(2)]
    for i, d in enumerate(dirs):
        run_shard(d, Shard(i, 2))
    return [str(d) for d in dirs]


def test_merge_puts_every_run_of_the_batch_in_one_directory(two_shards, tmp_path):
    out = tmp_path / "merged"
    records = merge_shards(two_shards, str(out), log=lambda msg: None)
    plan = read_batch_file(two_shards[0])["plan"]
    assert sorted(f"{r['scenario']['name']}/{r['case']['name']}/rep{r['rep']}" for r in records) == sorted(plan)
    assert all((out / "runs" / key / "run.json").exists() for key in plan)
    merged = json.loads((out / "batch.json").read_text())
    assert [m["shard"]["index"] for m in merged["merged_from"]] == [0, 1] and merged["missing"] == []


def test_merge_refuses_a_directory_twice_and_a_shard_twice(two_shards, tmp_path):
    with pytest.raises(BatchError, match="given twice"):
        merge_shards([two_shards[0], two_shards[1], two_shards[0] + "/"], str(tmp_path / "m1"))
    copy = tmp_path / "copy0"
    copy.mkdir()
    (copy / "batch.json").write_text((tmp_path / "shard0" / "batch.json").read_text())
    with pytest.raises(BatchError, match="both shard 0/2"):
        merge_shards([two_shards[0], str(copy)], str(tmp_path / "m2"))


def test_merge_refuses_shards_of_different_grids_or_versions(two_shards, tmp_path):
    other = tmp_path / "other"
    batch = plan_batch(scenarios(repeat=1), PROJECT, Shard(1, 2))
    runner.run_batch(batch.scenarios, str(other), log=lambda msg: None, batch=batch)
    with pytest.raises(BatchError, match="different grids"):
        merge_shards([two_shards[0], str(other)], str(tmp_path / "m"))
    newer = tmp_path / "newer"
    batch = plan_batch(scenarios(), {**PROJECT, "commit": "b" * 40}, Shard(1, 2))
    runner.run_batch(batch.scenarios, str(newer), log=lambda msg: None, batch=batch)
    with pytest.raises(BatchError, match="different project versions: commit aaaaaaaaaaaa and bbbbbbbbbbbb"):
        merge_shards([two_shards[0], str(newer)], str(tmp_path / "m"))


def test_merge_refuses_a_missing_shard_unless_asked(two_shards, tmp_path):
    with pytest.raises(BatchError, match=r"shard\(s\) 1/2 not given"):
        merge_shards([two_shards[0]], str(tmp_path / "m"))
    said = []
    records = merge_shards([two_shards[0]], str(tmp_path / "m"), allow_missing=True, log=said.append)
    assert len(records) == len(read_batch_file(two_shards[0])["plan"][0::2])
    assert any("not given" in line for line in said)


def test_merge_refuses_a_plan_key_that_leads_out_of_runs(two_shards, tmp_path):
    path = os.path.join(two_shards[1], "batch.json")
    batch = json.loads(open(path).read())
    batch["plan"][0] = "../../etc/passwd"
    with open(path, "w") as f:
        json.dump(batch, f)
    with pytest.raises(BatchError, match="is not a run's name"):
        merge_shards(two_shards, str(tmp_path / "m"))


# --- what the review of the above found ----------------------------------------------------------

@pytest.mark.parametrize("sweep, key, says", [
    ({"delay_ms": [5], "link": {"delay_ms": [10]}}, "sweep.link.delay_ms", "same key as sweep.delay_ms"),
    ({"link": {"rate_mbps": [1, 1.0]}}, "sweep.link.rate_mbps", "twice"),
    ({"link": {"delay_ms": [float("nan")]}}, "sweep.link.delay_ms", "not a finite number"),
    ({"disciplines": {"1": ["droptail"]}}, "sweep.disciplines.1", "each once"),
    ({"disciplines": [["ckcd"], ["red"]]}, "sweep.disciplines", "sweep disciplines.0"),
])
def test_grids_the_first_version_let_through_are_refused(sweep, key, says):
    with pytest.raises(ScenarioError, match=says) as err:
        grid(**sweep)
    assert err.value.key == key


def test_member_names_keep_every_digit_of_a_value():
    # omega's last decimal the core takes (its 6th): 0.100001 is not 0.1, in the name or the spec
    members = grid(link={"buffer_pkts": [1_000_000, 80]},
                   discipline_params={"ckcd": {"omega": [0.1, 0.100001]}}).expanded()
    assert [m.name for m in members] == ["g_buf1000000_omega0.1", "g_buf1000000_omega0.100001", "g_buf80_omega0.1",
                                         "g_buf80_omega0.100001"]
    assert "omega=0.100001" in members[1].qdisc_spec("ckcd")


def test_nan_is_not_a_number_a_scenario_takes():
    with pytest.raises(ScenarioError, match="not a finite number") as err:
        parse_scenario({**BASE, "link": {**BASE["link"], "delay_ms": float("nan")}})
    assert err.value.key == "link.delay_ms"


def test_a_variant_named_only_dots_is_refused():
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, "disciplines": [".."], "variants": {"..": {"discipline": "red"}}})
    assert err.value.key == "variants..."


def test_duration_cannot_shrink_a_grid_over_duration(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text('name = "d"\nduration_s = 10\n[link]\nrate_mbps = 10\ndelay_ms = 5\nbuffer_pkts = 20\n'
                    '[[flows]]\nsrc = "h1"\ndst = "h3"\ncc = "cubic"\n[sweep]\nduration_s = [10, 20]\n')
    assert len(select([str(path)], None, None, [])) == 2
    with pytest.raises(ScenarioError, match="--duration") as err:
        select([str(path)], 5, None, [])
    assert err.value.key == "sweep.duration_s"


@pytest.mark.parametrize("text", ["\u0661/\u0662", " 0/2", "0/2 "])  # Arabic-Indic digits, spaces
def test_a_shard_is_ascii_digits_only(text):
    with pytest.raises(BatchError):
        Shard.parse(text)


def _edit_batch(shard_dir, **fields):
    path = os.path.join(shard_dir, "batch.json")
    batch = json.loads(open(path).read())
    batch.update(fields)
    with open(path, "w") as f:
        json.dump(batch, f)
    return batch


def test_merge_checks_the_fields_a_batch_id_stands_for(two_shards, tmp_path):
    plan = json.loads(open(os.path.join(two_shards[1], "batch.json")).read())["plan"]
    _edit_batch(two_shards[1], plan=plan[::-1])  # the same batch_id, another order
    with pytest.raises(BatchError, match="not shards of one batch"):
        merge_shards(two_shards, str(tmp_path / "m"))


@pytest.mark.parametrize("fields, named", [
    ({"shard": {"index": 0, "count": 10**15}}, "shard"),
    ({"shard": {"index": True, "count": 2}}, "shard"),
    ({"seed": "7"}, "shuffled/seed"),
    ({"plan": ["a/b/rep1", "a/b/rep1"]}, "plan"),
    ({"project": {"commit": 5}}, "project"),
])
def test_a_malformed_batch_file_is_refused_naming_its_field(two_shards, tmp_path, fields, named):
    _edit_batch(two_shards[1], **fields)
    with pytest.raises(BatchError, match=f"batch.json: {named}"):
        merge_shards(two_shards, str(tmp_path / "m"))


def test_merge_refuses_shards_of_an_unknown_version(fake_lab, tmp_path):
    fake_lab(FakeLab())
    unknown = {"commit": None, "dirty": None, "diff_sha256": None, "package": "0.1.0"}
    dirs = []
    for i in range(2):
        batch = plan_batch(scenarios(), unknown, Shard(i, 2))
        runner.run_batch(batch.scenarios, str(tmp_path / f"s{i}"), log=lambda msg: None, batch=batch)
        dirs.append(str(tmp_path / f"s{i}"))
    with pytest.raises(BatchError, match="version it was made by is unknown"):
        merge_shards(dirs, str(tmp_path / "m"))


def test_merge_copies_no_symlink_and_reads_no_record_that_is_not_one(two_shards, tmp_path):
    key = read_batch_file(two_shards[1])["plan"][1]
    os.symlink("/etc/hostname", os.path.join(two_shards[1], "runs", key, "planted"))
    with pytest.raises(BatchError, match="symlink or special file"):
        merge_shards(two_shards, str(tmp_path / "m"))
    os.unlink(os.path.join(two_shards[1], "runs", key, "planted"))
    with open(os.path.join(two_shards[1], "runs", key, "run.json"), "w") as f:
        json.dump([1, 2], f)
    with pytest.raises(BatchError, match=f"{key}: not in"):
        merge_shards(two_shards, str(tmp_path / "m"))


def test_a_new_batch_into_a_directory_with_finished_runs_is_refused_and_nothing_is_lost(fake_lab, tmp_path):
    """Rule: a results directory holds one batch; a finished run is never written over. A second
    batch into it (here: more repetitions of the same cases) is refused before anything runs."""
    fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 1), sc=scenarios(repeat=1))
    path = tmp_path / "runs" / "g_rtt10ms" / "droptail" / "rep1" / "run.json"
    before = path.read_bytes()
    again = fake_lab(FakeLab())
    with pytest.raises(BatchError, match="already holds 4 finished runs .* --resume"):
        run_shard(tmp_path, Shard(0, 1), sc=scenarios(repeat=2))
    assert again.calls == [] and path.read_bytes() == before


def test_report_leaves_out_runs_of_another_batch_in_the_directory(fake_lab, tmp_path):
    """A directory written before it held one batch may hold another batch's runs: its report
    reads only the runs of the batch its batch.json names."""
    fake_lab(FakeLab())
    run_shard(tmp_path, Shard(0, 1), sc=scenarios(repeat=1))
    old = json.loads((tmp_path / "runs" / "g_rtt10ms" / "droptail" / "rep1" / "run.json").read_text())
    stray = tmp_path / "runs" / "gone" / "droptail" / "rep1"
    stray.mkdir(parents=True)
    (stray / "run.json").write_text(json.dumps({**old, "batch_id": "another"}))
    loaded = records.load_records(str(tmp_path), log=lambda msg: None)
    assert len(loaded) == 2 * 2 and all(r["batch_id"] == old["batch_id"] for r in loaded)


def test_run_case_never_empties_a_finished_run(tmp_path):
    """Rule: run_case refuses a directory whose run.json holds a finished run (metrics), before
    it deletes anything or starts a lab."""
    sc = scenarios()[0]
    record = {**one_run.failed_record(sc, sc.cases()[0], 1, None),
              "metrics": {"fidelity": {"trusted": False, "reasons": ["CPU"]}}}
    records.write_json(str(tmp_path / "rep1" / "run.json"), record)
    (tmp_path / "rep1" / "link-l1.jsonl").write_text("{}\n")
    with pytest.raises(one_run.RunError, match="holds a finished run"):
        one_run.run_case(sc, sc.cases()[0], 1, str(tmp_path / "rep1"))
    assert sorted(os.listdir(tmp_path / "rep1")) == ["link-l1.jsonl", "run.json"]


def test_a_run_directory_that_is_a_symlink_is_refused_before_the_lab(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("x")
    link = tmp_path / "rep1"
    link.symlink_to(target)
    sc = scenarios()[0]
    with pytest.raises(one_run.RunError, match="is a symlink"):
        one_run.run_case(sc, sc.cases()[0], 1, str(link))
    assert (target / "precious").exists()


# --- until trusted -----------------------------------------------------------------------------

class UntrustedLab(FakeLab):
    """FakeLab whose runs of the named cases are untrusted until the given call count."""

    def __init__(self, untrusted_case: str, trusted_after: int):
        super().__init__()
        self.untrusted_case, self.trusted_after = untrusted_case, trusted_after

    def __call__(self, scenario, case, rep, run_dir, progress=None, made_by=None):
        record = super().__call__(scenario, case, rep, run_dir, progress, made_by)
        mine = [c for c in self.calls if c.split("/")[1] == self.untrusted_case]
        if case.name == self.untrusted_case and len(mine) <= self.trusted_after:
            record["metrics"]["fidelity"] = {"trusted": False, "reasons": ["CPU above 90 %"]}
            records.write_json(os.path.join(run_dir, "run.json"), record)
        return record


def test_until_trusted_adds_runs_after_the_plans_until_each_case_has_n_trusted(fake_lab, tmp_path):
    """Rule: --until-trusted N runs a case again (rep numbers after the plan's) until it has N
    trusted runs, at most extra_max times; untrusted runs are kept, never rerun in place."""
    sc = [parse_scenario({**BASE, "repeat": 2})]
    lab = fake_lab(UntrustedLab("ckcd", trusted_after=3))  # ckcd: 3 untrusted runs, then trusted
    batch = plan_batch(sc, PROJECT)
    said = []
    out = runner.run_batch(sc, str(tmp_path), log=said.append, batch=batch, until_trusted=2, extra_max=5)
    ckcd = [r for r in out if r["case"]["name"] == "ckcd"]
    assert [r["rep"] for r in ckcd] == [1, 2, 3, 4, 5]  # 2 planned + 3 extra: reps 3 (untrusted), 4, 5
    assert sum(records.trusted(r) for r in ckcd) == 2
    assert len([c for c in lab.calls if "/droptail/" in c]) == 2  # trusted from the start: no extra
    assert any("g/ckcd has 2 trusted of 5 runs after 3 extra" in line for line in said)
    assert len(records.load_records(str(tmp_path))) == 7  # the report sees the extras too


def test_until_trusted_stops_at_its_bound_and_says_so(fake_lab, tmp_path):
    sc = [parse_scenario({**BASE, "repeat": 1})]
    fake_lab(UntrustedLab("ckcd", trusted_after=99))
    said = []
    out = runner.run_batch(sc, str(tmp_path), log=said.append, batch=plan_batch(sc, PROJECT),
                           until_trusted=3, extra_max=2)
    assert [r["rep"] for r in out if r["case"]["name"] == "ckcd"] == [1, 2, 3]
    assert any("has 0 trusted of 3 runs after 2 extra (the bound of 2 is spent)" in line for line in said)


def test_extra_runs_of_two_shards_never_share_a_number_and_merge_keeps_them(fake_lab, tmp_path):
    assert [runner.extra_rep(3, Shard(i, 2), k) for i in (0, 1) for k in (0, 1)] == [4, 6, 5, 7]
    sc = [parse_scenario({**BASE, "repeat": 2})]
    fake_lab(UntrustedLab("ckcd", trusted_after=1))
    dirs = [str(tmp_path / f"s{i}") for i in range(2)]
    for i, d in enumerate(dirs):
        batch = plan_batch(sc, PROJECT, Shard(i, 2))
        runner.run_batch(sc, d, log=lambda msg: None, batch=batch, until_trusted=2, extra_max=1)
    merged = merge_shards(dirs, str(tmp_path / "m"), log=lambda msg: None)
    keys = sorted(records.run_key(r) for r in merged)
    assert len(keys) == len(set(keys)) and any(k.endswith("/rep3") or k.endswith("/rep4") for k in keys)
    assert (tmp_path / "m" / "runs" / keys[0] / "run.json").exists()


def test_each_shard_tops_a_case_up_to_its_share_so_the_merged_batch_has_n_and_no_more(fake_lab, tmp_path):
    """Rule: with --until-trusted N a shard tops a case up to ceil(N x the runs of it the shard
    planned / repeat), its share: the shards' shares add up to at least N, and a case already
    trusted in every run gets no extra run in any shard (a shard holding one of a case's two
    runs does not top it up to two on its own)."""
    assert [runner.shard_target(3, k, 3) for k in (0, 1, 2, 3)] == [0, 1, 2, 3]
    assert runner.shard_target(5, 1, 3) + runner.shard_target(5, 2, 3) == 2 + 4 >= 5
    sc = [parse_scenario({**BASE, "repeat": 2})]
    lab = fake_lab(FakeLab())
    dirs = [str(tmp_path / f"s{i}") for i in range(2)]
    for i in range(2):  # the seeded plan deals each case one run to each shard: each holds half of each case
        assert sorted(item.case.name for item in plan_batch(sc, PROJECT, Shard(i, 2)).mine()) == ["ckcd", "droptail"]
    for i, d in enumerate(dirs):
        runner.run_batch(sc, d, log=lambda msg: None, batch=plan_batch(sc, PROJECT, Shard(i, 2)), until_trusted=2)
    assert len(lab.calls) == 4  # the plan's 2 cases x 2 runs, all trusted: no shard ran an extra
    merged = merge_shards(dirs, str(tmp_path / "m"), log=lambda msg: None)
    assert sorted(r["rep"] for r in merged) == [1, 1, 2, 2]


# --- pooling -----------------------------------------------------------------------------------

FIXTURE = os.path.join(REPO, "tests", "fixtures", "run_record", "runs", "bbr_cubic", "droptail", "rep1", "run.json")


class RecordedLab(FakeLab):
    """Writes a real lab run's record (tests/fixtures/run_record) under each run's name: a
    record the report can recompute every metric from."""

    def __call__(self, scenario, case, rep, run_dir, progress=None, made_by=None):
        self.calls.append(f"{scenario.name}/{case.name}/rep{rep}")
        with open(FIXTURE) as f:
            record = json.load(f)
        record.update(one_run.failed_record(scenario, case, rep, None), metrics=record["metrics"], **(made_by or {}))
        records.write_json(os.path.join(run_dir, "run.json"), record)
        return record

def _batch_dir(tmp_path, name, sc, project=PROJECT):
    batch = plan_batch(sc, project)
    runner.run_batch(sc, str(tmp_path / name), log=lambda msg: None, batch=batch)
    return str(tmp_path / name)


def test_report_pools_the_trusted_runs_of_one_case_over_two_batches(fake_lab, tmp_path):
    """Rule: `report DIR DIR --out` pools each case's runs of both batches (n adds up)."""
    fake_lab(RecordedLab())
    at_100 = {**BASE, "link": {**BASE["link"], "rate_mbps": 100}}  # the recorded run's rate
    a = _batch_dir(tmp_path, "a", [parse_scenario({**at_100, "repeat": 2})])
    b = _batch_dir(tmp_path, "b", [parse_scenario({**at_100, "repeat": 3})])
    pooled, batches = pool.pool_dirs([a, b], log=lambda msg: None)
    assert len(pooled) == 2 * 2 + 2 * 3 and len(batches) == 2
    assert cli.main(["report", a, b, "--out", str(tmp_path / "p")]) == 0
    rows = {row["case"]: row for row in csv.DictReader(open(tmp_path / "p" / "summary.csv"))}
    assert rows["ckcd"]["runs"] == rows["ckcd"]["trusted"] == "5"


def test_report_refuses_to_pool_different_scenarios_under_one_name(fake_lab, tmp_path):
    fake_lab(FakeLab())
    a = _batch_dir(tmp_path, "a", [parse_scenario(BASE)])
    b = _batch_dir(tmp_path, "b", [parse_scenario({**BASE, "link": {**BASE["link"], "buffer_pkts": 20}})])
    with pytest.raises(pool.PoolError, match="g/ckcd: .* link.buffer_pkts is 80 in .*/a/runs/g/ckcd/rep1 and 20 in .*/b/"):
        pool.pool_dirs([a, b], log=lambda msg: None)
    assert cli.main(["report", a, b, "--out", str(tmp_path / "p")]) == 2


def test_report_refuses_one_run_twice_and_other_versions_when_asked(fake_lab, two_shards, tmp_path):
    merged = tmp_path / "merged"
    merge_shards(two_shards, str(merged), log=lambda msg: None)
    with pytest.raises(pool.PoolError, match="both hold run .*a shard and the merge"):
        pool.pool_dirs([two_shards[0], str(merged)], log=lambda msg: None)
    newer = _batch_dir(tmp_path, "newer", scenarios(), {**PROJECT, "commit": "b" * 40})
    for r in records.walk_records(newer):  # provenance.collect is faked: give the run its version
        r["provenance"] = {"project": {**PROJECT, "commit": "b" * 40}}
        records.write_json(os.path.join(records.run_dir_of(newer, r["scenario"]["name"], r["case"]["name"],
                                                           r["rep"]), "run.json"), r)
    both, _ = pool.pool_dirs([str(merged), newer], log=lambda msg: None)
    assert len(both) == 2 * len(read_batch_file(two_shards[0])["plan"])
    with pytest.raises(pool.PoolError, match="--same-version: the runs come from 2 project versions"):
        pool.pool_dirs([str(merged), newer], same_version=True, log=lambda msg: None)


def test_the_offline_commands_import_nothing_of_mininet(fake_lab, tmp_path):
    """Rule: report, merge and export run on a machine without the lab (no Mininet, no root)."""
    fake_lab(RecordedLab())
    two_shards = [str(tmp_path / f"s{i}") for i in range(2)]
    for i, d in enumerate(two_shards):
        run_shard(d, Shard(i, 2))
    code = ("import sys; from experiments import cli; "
            f"cli.main(['merge', {two_shards[0]!r}, {two_shards[1]!r}, '--out', {str(tmp_path / 'm')!r}]); "
            f"cli.main(['report', {str(tmp_path / 'm')!r}]); "
            f"cli.main(['export', '--flent', {str(tmp_path / 'm')!r}]); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('mininet', 'experiments.run.orchestrate')); "
            "print('IMPORTED', bad); sys.exit(1 if bad or 'experiments.run.orchestrate' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_case_that_spent_its_bound_runs_again_only_when_a_resume_raises_the_bound(fake_lab, tmp_path):
    """Rule: once a short case has had its extra_max extra runs, --resume with the same bound runs
    nothing (so advising a bare --resume would loop), and --resume with a higher bound runs that
    case again, numbered after its extras, until it has N trusted runs, and no other case."""
    sc = [parse_scenario({**BASE, "repeat": 2})]
    batch = plan_batch(sc, PROJECT)
    fake_lab(UntrustedLab("ckcd", trusted_after=3))  # ckcd: its first 3 runs untrusted
    runner.run_batch(sc, str(tmp_path), log=lambda msg: None, batch=batch, until_trusted=2, extra_max=1)
    same = fake_lab(UntrustedLab("ckcd", trusted_after=0))
    runner.run_batch(sc, str(tmp_path), log=lambda msg: None, batch=batch, resume=True, until_trusted=2, extra_max=1)
    assert same.calls == []
    more = fake_lab(UntrustedLab("ckcd", trusted_after=0))
    out = runner.run_batch(sc, str(tmp_path), log=lambda msg: None, batch=batch, resume=True, until_trusted=2,
                           extra_max=4)
    assert more.calls == ["g/ckcd/rep4", "g/ckcd/rep5"]
    ckcd = [r for r in out if r["case"]["name"] == "ckcd"]
    assert [r["rep"] for r in ckcd] == [1, 2, 3, 4, 5] and sum(records.trusted(r) for r in ckcd) == 2

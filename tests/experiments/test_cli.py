"""The `ckcd-coex` command line without a lab: which scenarios and cases a command selects,
its refusals and exit codes, and the progress line's arithmetic."""

from __future__ import annotations

import io
import time

import pytest

from experiments import cli
from experiments.run.progress import Progress
from experiments.scenario.catalog import GROUPS, builtin_names, resolve, select


def test_groups_name_builtin_scenarios():
    for members in GROUPS.values():
        assert set(members) <= set(builtin_names())


def test_default_is_seed000_with_paper_durations():
    scenarios = select([], None, None, [])
    assert [s.name for s in scenarios] == GROUPS["seed000"]
    assert all(s.duration_s == 120 and s.repeat == 1 for s in scenarios)


def test_duration_repeat_and_only_shape_the_batch():
    scenarios = select(["seed001"], 20, 3, ["separate_queues"])
    # coex_paths has no Separate Queues case: left out, not run empty
    assert [s.name for s in scenarios] == ["coex_queues", "coex_queues_paced"]
    for s in scenarios:
        assert [c.approach for c in s.cases()] == ["separate_queues"]
        assert s.duration_s == 20 and s.repeat == 3
        full = resolve(s.name)
        # flow start/stop times scale with the run, e.g. 15 s of 60 -> 5 s of 20
        assert [f.start_s for f in s.flows] == [round(f.start_s * 20 / full.duration_s, 3) for f in full.flows]


def test_all_expands_without_the_demo_and_without_duplicates():
    names = [s.name for s in select(["all", "bbr_cubic"], None, None, [])]
    # hdcodel_fair sweeps five delays, emulator_lateness five latenesses and release_batching two
    # settings: one scenario each, in place of the file's own.
    assert "demo" not in names and len(names) == len(set(names)) == len(builtin_names()) - 1 + 4 + 4 + 1
    assert "hdcodel_fair" not in names and "hdcodel_fair_rtt64ms" in names


def test_only_picks_one_member_of_a_sweep():
    (sc,) = select(["seed003"], 20, None, ["hdcodel_fair_rtt8ms"])
    assert sc.name == "hdcodel_fair_rtt8ms" and sc.link.delay_ms == 4 and sc.duration_s == 20
    assert [c.name for c in sc.cases()] == ["droptail", "codel", "static", "dynamic"]
    # a scenario and a case together: one case of one member (rerunning an untrusted run)
    (sc,) = select(["seed003"], None, None, ["hdcodel_fair_rtt1ms", "codel"])
    assert sc.name == "hdcodel_fair_rtt1ms" and [c.name for c in sc.cases()] == ["codel"]


@pytest.mark.parametrize("argv,message", [
    (["run", "bbr_cubic", "--only", "nosuch"], "matches no case"),
    (["run", "no_such_scenario"], "no_such_scenario"),
    (["run", "bbr_cubic", "--duration", "-5"], "duration_s"),
])
@pytest.mark.lab  # the CLI checks for root before it reads its arguments
def test_refusals_exit_2_before_any_lab(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "two", "1001", "+3", " 3", "3_0", "\u0663"])
@pytest.mark.parametrize("option", ["--repeat", "--until-trusted"])
def test_counts_of_runs_are_ascii_whole_numbers_up_to_a_thousand(option, value, capsys):
    """Rule: --repeat and --until-trusted take 1..1000 in ASCII digits only (int() alone would take
    '+3', ' 3', '3_0' and other scripts' digits), so a slip cannot keep a root lab busy for days."""
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "bbr_cubic", option, value])
    assert e.value.code == 2 and option in capsys.readouterr().err


def test_extra_max_takes_zero_and_no_option_is_abbreviated_or_smuggled_in_a_value():
    """Rule: --extra-max takes 0..1000; `run` accepts no abbreviation (`--until 3`), and a value
    after `=` stays a value (`--only=--out=/x` sets --only, not --out)."""
    parser = cli.build_parser()
    assert parser.parse_args(["run", "bbr_cubic", "--until-trusted", "3", "--extra-max", "0"]).extra_max == 0
    for argv in (["--until", "3"], ["--extra", "2"], ["--until-trusted=--out=/x"], ["--extra-max", "1001"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["run", "bbr_cubic", *argv])
    args = parser.parse_args(["run", "bbr_cubic", "--only=--out=/x"])
    assert args.only == "--out=/x" and args.out == "results/run"


def test_report_of_a_directory_without_runs_says_so(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 1
    assert "no runs under" in capsys.readouterr().err


def test_list_shows_every_scenario_with_its_time(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in builtin_names():
        assert name in out
    assert "group seed000:" in out


def test_progress_remaining_time_counts_runs_to_come_and_measured_overhead():
    stream = io.StringIO()
    p = Progress([30.0, 30.0, 60.0], overhead_s=12.0, stream=stream, every_s=0.0)
    assert p.remaining_s() == pytest.approx(120 + 3 * 12)
    p.begin_run(0, "demo/droptail")
    p.tick(10.0)
    assert p.remaining_s() == pytest.approx(20 + 90 + 3 * 12)
    p.end_run(wall_s=40.0)  # this run's overhead was 10 s: the estimate now uses it
    assert p.remaining_s() == pytest.approx(90 + 2 * 10)
    p.begin_run(1, "demo/ckcd")
    p.tick(5.0)
    line = stream.getvalue().splitlines()[-1]
    assert line.startswith("[2/3] demo/ckcd: 5/30 s | elapsed ")
    assert line.endswith("remaining ~01:45")  # 25 + 60 + 2 x 10 s


def test_progress_time_format():
    assert Progress.fmt(59.6) == "01:00" and Progress.fmt(3725) == "1:02:05" and Progress.fmt(-3) == "00:00"

"""A scenario's discipline parameters are checked by the core when the file is read, and the
spec the core is given is the one spec_text renders: a value the core would refuse fails the
load, naming the scenario key, never every run of a case in the middle of a batch."""

from __future__ import annotations

import pytest

from experiments import cli

from experiments.lab import net as lab

from experiments.run import orchestrate as runner

from experiments.scenario import check as scenario_check
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import load_scenario, parse_scenario
from ovs_config.aqm import AqmBackendError, check_spec

BASE = {"name": "s", "duration_s": 10, "disciplines": ["droptail", "red"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80},
        "flows": [{"src": "h1", "dst": "h3", "cc": "bbr"}]}

RED_MAX_P_TOML = """
name = "tiny_max_p"
duration_s = 10
disciplines = ["red"]
[link]
rate_mbps = 50
delay_ms = 10
buffer_pkts = 80
[discipline_params.red]
max_p = 0.00005
[[flows]]
src = "h1"
dst = "h3"
cc = "bbr"
"""


def refusal(doc: dict) -> ScenarioError:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "s.toml")
    return err.value


def test_max_p_written_0_00005_reaches_the_core_as_0_00005_and_is_taken(tmp_path):
    # Python writes the float as 5e-05, which the core's spec grammar refuses: every run of
    # the case failed while the file passed its check.
    path = tmp_path / "tiny_max_p.toml"
    path.write_text(RED_MAX_P_TOML)
    spec = load_scenario(str(path)).qdisc_spec("red")
    assert "max_p=0.00005 " in spec and "e-" not in spec
    check_spec(spec, 50_000_000)


def test_a_value_with_more_decimals_than_the_core_takes_is_refused_naming_its_key():
    # max_p takes 6 decimals; the 7th was rounded off before (0.1000004 ran as 0.1)
    err = refusal({**BASE, "discipline_params": {"red": {"max_p": 0.1000004}}})
    assert err.key == "discipline_params.red.max_p" and "at most 6 decimals, got 0.1000004" in err.message


@pytest.mark.parametrize("params,key", [
    ({"min": 70}, "discipline_params.red.min"),          # above Table II's max = 60
    ({"max": 10}, "discipline_params.red.max"),          # below Table II's min = 20
    ({"min": 30, "max": 25}, "discipline_params.red.max"),  # both set: the one the core names
])
def test_red_min_above_max_is_refused_by_the_core_at_load_naming_the_key(params, key):
    err = refusal({**BASE, "discipline_params": {"red": params}})
    assert err.key == key and str(err).startswith(f"s.toml: {key}: red: parameter 'max'")


def test_a_grid_point_the_core_refuses_is_refused_naming_the_swept_key():
    err = refusal({**BASE, "sweep": {"discipline_params": {"red": {"min": [10, 70]}}}})
    assert err.key == "sweep.discipline_params.red.min"
    assert "at the grid point discipline_params.red.min = 70: discipline_params.red.min: red: parameter 'max'" \
        in err.message


def test_a_grid_point_where_a_derived_parameter_is_refused_names_the_point():
    # Table II derives RED's thresholds from the buffer: at 1 packet, min = max = 1
    err = refusal({**BASE, "sweep": {"link": {"buffer_pkts": [80, 1]}}})
    assert err.key == "discipline_params.red.max"
    assert err.message.startswith("at the grid point link.buffer_pkts = 1: red: parameter 'max' = 1")


def test_a_variant_the_core_refuses_names_the_variants_key_or_the_discipline_params_it_takes():
    variant = {**BASE, "disciplines": ["v"], "variants": {"v": {"discipline": "red", "min": 70}}}
    assert refusal(variant).key == "variants.v.min"
    inherited = {**variant, "variants": {"v": {"discipline": "red"}}, "discipline_params": {"red": {"min": 70}}}
    assert refusal(inherited).key == "discipline_params.red.min"


@pytest.fixture
def core_calls(monkeypatch):
    """Every (spec, rate) the core is asked about, with a fresh cache."""
    calls = []
    monkeypatch.setattr(scenario_check, "check_spec", lambda spec, rate: calls.append((spec, rate)))
    scenario_check._core_refusal.cache_clear()
    yield calls
    scenario_check._core_refusal.cache_clear()


def test_the_core_is_asked_once_per_distinct_spec_and_rate(core_calls):
    # 3 x 2 points, two disciplines, but only the rate changes a spec: 2 rates x 2 disciplines
    parse_scenario({**BASE, "sweep": {"flows": {"0": {"cc": ["bbr", "cubic", "reno"]}},
                                      "link": {"rate_mbps": [10, 50]}}})
    assert len(core_calls) == len(set(core_calls)) == 4


def test_the_core_is_asked_at_every_rate_the_link_takes(core_calls):
    # ckcd-link rebuilds a discipline at a link change's rate and refuses the change if it
    # cannot: care takes the link's rate, its spec leaves it out
    parse_scenario({**BASE, "disciplines": ["care"], "link_changes": [{"at_s": 5, "rate_mbps": 10}]})
    assert [rate for _, rate in core_calls] == [50_000_000, 10_000_000]


def test_a_core_that_cannot_be_asked_fails_the_load_naming_the_discipline(monkeypatch):
    def no_binary(spec, rate):
        raise AqmBackendError("cannot check disciplines: ckcd-replay: No such file (make -C datapath)")
    monkeypatch.setattr(scenario_check, "check_spec", no_binary)
    scenario_check._core_refusal.cache_clear()
    try:
        err = refusal({**BASE, "disciplines": ["red"]})
    finally:
        scenario_check._core_refusal.cache_clear()
    assert err.key == "discipline_params.red" and "make -C datapath" in err.message


def test_run_prints_the_refusal_and_exits_2_before_any_lab(tmp_path, monkeypatch, capsys):
    path = tmp_path / "bad_red.toml"
    path.write_text(RED_MAX_P_TOML.replace("max_p = 0.00005", "min = 70"))
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)  # the root check comes first; no lab follows
    monkeypatch.setattr(lab, "teardown_on_sigterm", lambda: None)
    monkeypatch.setattr(runner, "run_batch", lambda *a, **k: pytest.fail("a lab was started"))
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"{path}: discipline_params.red.min: red: parameter 'max' = 60 must be greater than 'min' = 70" \
        in capsys.readouterr().err

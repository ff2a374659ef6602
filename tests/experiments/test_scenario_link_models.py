"""experiments/scenario/link_models.py: a scenario's trace and loss are checked as ckcd-link checks
them (the daemon itself is asked about each loss spec and trace here: it refuses a bad one naming
its option before it opens an interface), and what the runner hands the daemon."""

from __future__ import annotations

import subprocess

import pytest

from experiments.scenario import link_models
from experiments.scenario.catalog import parse_scenario
from experiments.traces import generate
from ovs_config.link_daemon import DEFAULT_BINARY

LOSS_SPECS = ["bernoulli p=0.01", "bernoulli p=0", "bernoulli p=1", "gilbert p=0.01 r=0.25",
              "gilbert p=0.01 r=0.25 bad=0.5 good=0.001", "gilbert p=0.1", "gilbert p=0.1 r=0", "bernoulli",
              "bernoulli p=1.5", "bernoulli q=0.1", "uniform p=0.1", "bernoulli p=-0.1", "gilbert r=0.2 p=0.1",
              "bernoulli p=1e-10", "bernoulli p=1e-9", "bernoulli p=0.1 p=0.2", "gilbert p=0.1 r=0.2 bad=0.5 bad=0.4",
              "none", "nonex p=1", "bernoulli  p=0.5"]


def daemon_refuses(option: str, value: str) -> bool:
    """ckcd-link's verdict on one option: it checks options before interfaces, so a refusal names
    the option and an accepted value gets as far as the missing interface."""
    p = subprocess.run([str(DEFAULT_BINARY), "--if-a", "lo", "--if-b", "ckcd-none0", "--rate", "1mbit",
                        "--control", "/tmp/ckcd-link-test-models.sock", option, value],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    return f"{option}:" in p.stderr


@pytest.mark.parametrize("spec", LOSS_SPECS)
def test_a_loss_spec_is_refused_exactly_when_the_daemon_refuses_it(spec):
    """Rule: the scenario check and ckcd-link agree on every loss spec (so a scenario is refused
    before a lab starts, never by the daemon in the middle of a batch)."""
    try:
        link_models.check_loss(spec)
        refused = False
    except ValueError:
        refused = True
    assert refused == daemon_refuses("--loss", spec), spec


@pytest.mark.parametrize("name", ["onoff", "sawtooth", "randomwalk"])
def test_a_trace_is_read_as_the_daemon_reads_it(name):
    """Rule: a shipped trace loads in ckcd-link, and the scenario's rate for it is its average
    as the generator and the daemon compute it."""
    path = link_models.trace_path(name)
    assert not daemon_refuses("--trace", path)
    assert link_models.trace_average_bps(path) == pytest.approx(generate.average_bps(generate.TRACES[f"{name}.trace"]()))


def test_the_runner_hands_the_daemon_each_direction_its_own():
    """Rule: [link] and [link.reverse] become ckcd-link's per-direction options (ab forward, ba
    reverse: the trace by its path under experiments/traces), and the reverse delay counts in
    the base RTT."""
    scenario = parse_scenario({"name": "m", "duration_s": 10, "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}],
                               "link": {"trace": "onoff", "delay_ms": 10, "buffer_pkts": 80, "loss": "bernoulli p=0.01",
                                        "reverse": {"rate_mbps": 5, "delay_ms": 30, "buffer_pkts": 20}}}, "m.toml")
    assert link_models.daemon_options(scenario.link) == {
        "trace": link_models.trace_path("onoff"), "loss": "bernoulli p=0.01", "rate_ba_bps": 5_000_000,
        "delay_ba_ms": 30.0, "qdisc_ba": "droptail limit=20"}
    assert scenario.link.rate_bps == round(generate.average_bps(generate.onoff()))
    assert scenario.link.rtt_ms == 40.0 and scenario.base_rtt_ms("h1", "h3") == 40.0
    plain = parse_scenario({"name": "p", "duration_s": 10, "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}],
                            "link": {"rate_mbps": 10, "delay_ms": 10, "buffer_pkts": 80}}, "p.toml")
    assert link_models.daemon_options(plain.link) == {} and plain.link.rtt_ms == 20.0

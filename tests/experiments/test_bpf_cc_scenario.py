"""BPF congestion controls in scenarios, without a lab: which names a flow's `cc` takes, the ECN
they imply, the one-control-per-host rule of a control that negotiates ECN, and the refusal
before any lab starts where BPF cannot load (experiments/lab/bpf_cc.py)."""

import pytest

from experiments.lab import bpf_cc
from experiments.lab.traffic import BPF_CONGESTION_CONTROLS
from experiments.run import orchestrate
from experiments.scenario.catalog import parse_scenario
from experiments.scenario.model import ScenarioError

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["droptail"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}}


def doc(*flows):
    return {**BASE, "flows": list(flows)}


def test_every_bpf_control_of_the_scenarios_is_one_the_loader_knows():
    """Rule: the names a scenario accepts are exactly the loader's, each with its object's source."""
    assert set(BPF_CONGESTION_CONTROLS) == set(bpf_cc.BPF_CONTROLS)
    for control in bpf_cc.BPF_CONTROLS.values():
        assert control.map_name.startswith(bpf_cc.MAP_PREFIX)


def test_dctcp_flows_are_ecn_capable_and_vegas_flows_are_not_by_default():
    """Rule: bpf_dctcp negotiates ECN itself, so its flows are ECN-capable without saying so;
    bpf_vegas is a plain sender."""
    sc = parse_scenario(doc({"src": "h1", "dst": "h3", "cc": "bpf_dctcp"},
                            {"src": "h2", "dst": "h4", "cc": "bpf_vegas"}))
    assert [(f.cc, f.ecn) for f in sc.flows] == [("bpf_dctcp", True), ("bpf_vegas", False)]


@pytest.mark.parametrize("flows,key,words", [
    (({"src": "h1", "dst": "h3", "cc": "bpf_dctcp", "ecn": False},), "flows[0].ecn", "negotiates ECN itself"),
    # the receiver h3 would be bpf_dctcp's namespace default, so the CUBIC flow's socket there too
    (({"src": "h1", "dst": "h3", "cc": "bpf_dctcp"}, {"src": "h2", "dst": "h3", "cc": "cubic"}),
     "flows", "share host h3"),
    (({"src": "h1", "dst": "h3", "cc": "bpf_reno"},), "flows[0].cc", ""),
])
def test_refusals_name_the_key(flows, key, words):
    """Bad input: refused when the file is read, naming the key."""
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc(*flows), "t.toml")
    assert key in str(e.value) and words in str(e.value)


def test_a_batch_with_bpf_controls_stops_before_any_lab_where_bpf_cannot_load(monkeypatch, tmp_path):
    """Rule: a missing prerequisite (no BTF, no clang, not root) stops the batch with the reason
    before anything is written or started."""
    monkeypatch.setattr(bpf_cc, "prerequisites_missing", lambda: "this kernel has no BTF")
    sc = parse_scenario(doc({"src": "h1", "dst": "h3", "cc": "bpf_vegas"}))
    with pytest.raises(bpf_cc.BpfUnavailable, match="bpf_vegas: this kernel has no BTF"):
        orchestrate.run_batch([sc], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()

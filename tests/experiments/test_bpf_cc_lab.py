"""The BPF congestion controls in the real lab (datapath/bpf, experiments/lab/bpf_cc.py):
registered for a run, carrying its flows through ckcd-link as the kernel's own controls do,
each behaving as its design says, and gone afterwards.

One 12 s run each on the 50 Mbit/s, 10 ms dumbbell with an 80-packet buffer (BDP 83 packets):
Vegas alone and CUBIC alone under DropTail, and DCTCP alone under step marking (STEP_MARK).
Measured here (2026-11-26, two runs): queueing delay mean Vegas 1.7 and 1.3 ms, CUBIC 13.7 and
14.2 ms; goodput Vegas 46.6 and 47.2, CUBIC 47.9 and 47.8 Mbit/s (ceiling 47.8: 50 x 1448/1514);
DCTCP (one run) 2.2 ms, 47.4 Mbit/s, 2743 marks, no drop."""

import pytest

from experiments.lab import bpf_cc
from experiments.run.orchestrate import run_batch
from experiments.scenario.catalog import parse_scenario
from tests.experiments.test_runner_lab import stolen
from ovs_config.lablock import lab_lock

pytestmark = pytest.mark.lab  # root, BPF, Mininet, OVS, ckcd-link

LINK = {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}
CEILING_MBPS = 50 * 1448 / 1514
# The marking DCTCP is designed for (RFC 8257 section 3.1): CE on every packet whose queueing
# exceeds a threshold K, here fq_codel's ce_threshold. K = 3 ms (12 packets at 50 Mbit/s) is the
# paper's C x RTT / 7 for full use of the link at 20 ms RTT: with 1 ms DCTCP got 29 Mbit/s. CoDel's
# own marking, one mark per interval at first, is too sparse for DCTCP's small reductions: a run
# under it overflowed the 80-packet buffer 62 times.
STEP_MARK = {"step_mark": {"discipline": "fq_codel", "ecn": 1, "ce_threshold_ms": 3}}


def scenario(name, cc, discipline="droptail", variants=None):
    doc = {"name": name, "topology": "dumbbell", "duration_s": 12, "warmup_s": 3, "disciplines": [discipline],
           "link": LINK, "flows": [{"src": "h1", "dst": "h3", "cc": cc}]}
    if variants:
        doc["variants"] = variants
    return parse_scenario(doc, "test")


@pytest.fixture(scope="module")
def runs(private_ovs, tmp_path_factory):
    """One trusted run per scenario: a run the fidelity guard untrusted only because the
    hypervisor held the vCPU (steal) measured the hypervisor, so it is run again, twice at most,
    as an experimenter would; three in a row say nothing about the controls."""
    scenarios = [scenario("vegas", "bpf_vegas"), scenario("cubic", "cubic"),
                 scenario("dctcp", "bpf_dctcp", "step_mark", STEP_MARK)]
    out = {}
    for attempt in range(3):
        todo = [s for s in scenarios if s.name not in out or (out[s.name]["metrics"] and stolen(out[s.name]))]
        if not todo:
            break
        records = run_batch(todo, str(tmp_path_factory.mktemp(f"bpfcc{attempt}")))
        out.update({r["scenario"]["name"]: r for r in records})
    left = [f"{n}: {r['metrics']['fidelity']['reasons']}" for n, r in out.items() if r["metrics"] and stolen(r)]
    if left:
        pytest.skip("the hypervisor withheld the vCPU in three runs: " + "; ".join(left))
    return out


def test_each_run_loaded_its_control_and_left_none_behind(runs):
    """Rule: a run registers exactly the BPF controls its flows name, DCTCP as both ends'
    namespace default, and after the batch none of ours is registered, listed, or still held
    by the lab's last sockets (their hosts resend a FIN once: the kernel frees the programs
    within seconds, not minutes)."""
    assert runs["vegas"]["bpf_congestion_controls"] == ["bpf_vegas"]
    assert runs["cubic"]["bpf_congestion_controls"] == []
    assert runs["dctcp"]["bpf_congestion_controls"] == ["bpf_dctcp"]
    assert runs["dctcp"]["host_setup"]["tcp_congestion_control"] == {"h1": "bpf_dctcp", "h3": "bpf_dctcp"}
    assert runs["vegas"]["host_setup"]["tcp_orphan_retries"] == {"h1": 1, "h3": 1}
    for name, run in runs.items():
        assert run["error"] is None, (name, run["error"])
        assert [f["cc"] for f in run["metrics"]["flows"]] == [run["scenario"]["flows"][0]["cc"]]
    assert bpf_cc._our_maps() == {}  # neither registered nor draining: freed
    assert not bpf_cc.available() & set(bpf_cc.BPF_CONTROLS)


def test_vegas_keeps_the_queue_short_where_cubic_fills_it(runs):
    """Rule: Vegas holds alpha to beta (2-4) of its packets in the queue, CUBIC fills the buffer
    until it drops. Tolerances: Vegas's mean queueing delay at most 4 ms (4 packets are 1 ms at
    50 Mbit/s; delayed ACKs and the 100 ms samples' jitter, measured 1.7), at most a third of
    CUBIC's (measured 13.7), and the link still used: 60 % of the ceiling. Vegas reads any RTT
    jitter as queueing and yields (measured 98 % of the ceiling on an idle machine, 78 % with
    the kernel VM busy on the other core); a Vegas stuck at a small cwnd would get a few
    Mbit/s."""
    vegas, cubic = runs["vegas"]["metrics"], runs["cubic"]["metrics"]
    assert vegas["queue_delay_ms"]["mean"] <= 4.0, vegas["queue_delay_ms"]
    assert vegas["queue_delay_ms"]["mean"] <= cubic["queue_delay_ms"]["mean"] / 3, (vegas["queue_delay_ms"],
                                                                                 cubic["queue_delay_ms"])
    assert vegas["total_mbps"] >= 0.6 * CEILING_MBPS, vegas["total_mbps"]


def test_dctcp_answers_marks_without_losses(runs):
    """Rule: bpf_dctcp negotiates ECN itself (no tcp_ecn=1 needed), and answers step marking by
    its alpha-scaled reduction: marks at the link and CE echoed to the sender, no drop at the
    link in the measured window, the queue held near the 3 ms threshold (mean below 5 ms, half
    the buffer's 9.7 ms), the link used (85 % of the ceiling: K = C x RTT / 7 is the paper's
    bound for full use, and a 12 s run includes start-up)."""
    m = runs["dctcp"]["metrics"]
    assert sum(m["marks"].values()) > 50, m["marks"]
    assert sum(m["drops"].values()) == 0, m["drops"]
    assert m["senders"]["h1"]["delivered_ce"] > 0, m["senders"]
    assert m["queue_delay_ms"]["mean"] < 5.0, m["queue_delay_ms"]
    assert m["total_mbps"] >= 0.85 * CEILING_MBPS, m["total_mbps"]


def test_a_crashed_runs_control_is_removed_before_a_new_load(lab_ready):
    """Rule: one of our controls left registered (a run killed mid-way) does not stop the next
    run: loaded() unregisters it first (`ckcd-coex clean` calls the same remove_leftovers)."""
    with lab_lock():
        bpf_cc.build()
        bpf_cc.register(bpf_cc.BPF_CONTROLS["bpf_vegas"])
        with bpf_cc.loaded(["bpf_vegas"]) as names:
            assert names == ["bpf_vegas"] and "bpf_vegas" in bpf_cc.available()
            assert bpf_cc.registered_maps() == {"ckcd_bpf_vegas"}  # one, the new one
        assert bpf_cc._our_maps() == {}
        bpf_cc.register(bpf_cc.BPF_CONTROLS["bpf_dctcp"])
        assert bpf_cc.remove_leftovers() == ["ckcd_bpf_dctcp"]
        assert bpf_cc.registered_maps() == set() and "bpf_dctcp" not in bpf_cc.available()

"""aqm_reconfigure carries queued packets over: no AQM decision on them,
their enqueue timestamps kept."""

from __future__ import annotations

import pytest

from replaylib import MS, SEC, cbr, run, run_raw

C = 10_000_000  # slow link: a 50-packet burst is still queued 20 ms later


def burst(n=50, flow=1):
    return [(i * 1000, flow, 1500, 0) for i in range(n)]


@pytest.mark.parametrize("new", ["droptail limit=80", "red limit=80 min=1 max=2", "codel target_ms=0.001 interval_ms=0.001",
                                 "choke limit=80 min=0 max=2", "ckcd limit=80 qmin=1 qmax=2 d_ms=0.001 delta_ms=0.001",
                                 "bands weights=1,1 map=46:1 | codel | droptail",
                                 "fq_codel target_ms=0.001 interval_ms=0.001 ce_threshold_ms=0.001",
                                 "pie target_ms=0.001 tupdate_ms=1 max_burst_ms=0",
                                 "dualpi2 target_ms=0 tupdate_ms=1 alpha=50000 beta=50000 step_thresh_ms=0"])
def test_queued_packets_survive_reconfigure(new):
    r = run(burst(), "droptail limit=80", rate_bps=C, extra=["--reconfigure", f"{20 * MS}:{new}"])
    rc = r.reconfigures[0]
    assert rc["t_ns"] == 20 * MS
    carried = rc["qlen_pkts"]
    assert carried >= 30
    # the new, very aggressive disciplines made no decision on them: all 50 sent
    assert len(r.sent()) == 50 and not r.dropped()
    # timestamps kept: the sojourn of a carried packet counts from its arrival
    last = r.sent()[-1]
    assert last["sojourn_ns"] == last["t_ns"] - last["t_arr_ns"]
    assert last["sojourn_ns"] > 50 * 1500 * 8 * SEC // C - 50 * 1000 - 2 * 1500 * 8 * SEC // C
    assert rc["describe"].split()[0] == new.split()[0]


def test_order_kept_and_excess_over_new_limit_is_overflow():
    r = run(burst(), "droptail limit=80", rate_bps=C, extra=["--reconfigure", f"{1 * MS}:droptail limit=10"])
    sent = [p["seq"] for p in r.sent()]
    assert sent == sorted(sent)
    drops = r.dropped()
    assert drops and all(p["reason"] == "overflow" for p in drops)
    assert len(r.sent()) + len(drops) == 50
    # the newest packets were the excess
    assert min(p["seq"] for p in drops) > max(sent[:10])


def test_new_discipline_acts_on_new_arrivals():
    # 20 Mbit/s into 10: a 1000-packet droptail drops nothing; at 100 ms the
    # switch to a 5-packet droptail tail-drops the carried excess at that
    # instant, and new arrivals overflow from then on
    tr = cbr(1, 20e6, 0, 200 * MS)
    r = run(tr, "droptail limit=1000", rate_bps=C, extra=["--reconfigure", f"{100 * MS}:droptail limit=5"])
    assert not [p for p in r.dropped() if p["t_ns"] < 100 * MS]
    assert {p["t_ns"] for p in r.dropped() if p["t_arr_ns"] < 100 * MS} == {100 * MS}
    assert len([p for p in r.dropped() if p["t_arr_ns"] >= 100 * MS]) > 50


def test_bad_reconfigure_spec_is_an_error():
    cp = run_raw(["--qdisc", "droptail", "--reconfigure", "1000:codel interval_ms=0"], "0 1 1500\n5000 1 1500\n")
    assert cp.returncode == 2
    assert "interval_ms" in cp.stderr


@pytest.mark.parametrize("old,change,kept,gone", [
    ("dualpi2 limit=500 step_thresh_ms=3", "step_thresh_pkts=5", "step_thresh_pkts=5", "step_thresh_ms"),
    ("dualpi2 limit=500 step_thresh_pkts=7", "step_thresh_ms=2", "step_thresh_ms=2", None)])
def test_a_change_that_gives_the_step_in_other_units_replaces_it(old, change, kept, gone):
    """Rule (aqm_create_changed with a discipline's exclusive parameters; Linux's change takes
    TCA_DUALPI2_STEP_THRESH_PKTS or _US as the new step): a change gives only the parameters it
    changes and keeps the rest, but a parameter of a group that sets one thing in different units
    replaces the others of its group, so the step changes from time to packets and back without
    a conflict naming a parameter the change never gave. What the change does not touch (limit)
    is kept, and the queued packets carry over."""
    r = run(burst(), old, rate_bps=C, extra=["--change", f"{20 * MS}:{change}"])
    desc = r.reconfigures[0]["describe"]
    assert kept in desc.split() and "limit=500" in desc.split(), desc
    if gone:
        assert gone not in desc, desc
    else:
        assert "step_thresh_pkts=0" in desc.split(), desc
    assert r.reconfigures[0]["qlen_pkts"] >= 30 and len(r.sent()) == 50


def test_a_change_is_refused_naming_what_it_gives():
    """Rule: a change whose merged configuration is refused names the parameter, and the queue runs
    on unchanged; ckcd-replay exits 2."""
    cp = run_raw(["--qdisc", "dualpi2 limit=500", "--change", "1000:step_thresh_pkts=500"],
                 "0 1 1500\n5000 1 1500\n")
    assert cp.returncode == 2
    assert "--change" in cp.stderr and "'step_thresh_pkts'" in cp.stderr and "'limit'" in cp.stderr

"""The DCTCP-against-CUBIC kernel experiment's parts that need no VM (experiments/lab/vm_ecn.py):
the guest script it builds and the arithmetic of its summary. The VM run itself is an
experiment (docs/results/ecn.md), not a test."""

import os
import re

from experiments.lab import vm_ecn


def test_the_guest_runs_every_case_in_every_repeat_each_a_measured_step_with_the_bands_spec_whole():
    """Rule: each case runs once per repeat, case by case within a repeat, each run a measured
    step of its own (the host judges its steal) named by case and repeat."""
    script = vm_ecn.guest_script(repeat=2, duration_s=12, measured="measured() { :; }\n")
    runs = re.findall(r"^measured (\w+) run (\S+) (\d+) (\d+) (.*)$", script, re.M)
    assert [(n, int(r)) for _, n, r, _, _ in runs] == [(n, r) for r in (1, 2) for n in vm_ecn.CASES]
    for step, name, rep, tos, qdisc in runs:
        assert step == vm_ecn.step_name(name, int(rep)) and qdisc == vm_ecn.CASES[name][0]
        # DCTCP carries DSCP 46 only where the bands classifier needs it
        assert int(tos) == (vm_ecn.DSCP_EF_TOS if vm_ecn.CASES[name][1] else 0)
    # the bands spec goes to tc as one argument: quoted, never through eval (its '|' would pipe)
    assert 'ckcd spec "bands map=46:1' in script and "eval" not in script
    assert "-t 12 -O 3" in script and "@RUNS@" not in script and "@DURATION@" not in script
    assert "measured() { :; }" in script and "@MEASURED@" not in script
    # without a host to judge, a measured step is a plain step
    assert 'measured() { step "$@"; }' in vm_ecn.guest_script(repeat=1, duration_s=12)


def _run(dctcp, cubic, rep=1, reasons=(), dropped=3, marks=100):
    return {"flows": {"dctcp": {"mbps": dctcp, "srtt_ms": 25.0}, "cubic": {"mbps": cubic, "srtt_ms": 27.0}},
            "dropped": dropped, "marks": marks, "rep": rep, "reasons": list(reasons)}


def test_summary_pools_trusted_runs_only_with_queue_delay_over_the_base_rtt():
    """Rule: a case's means are over its trusted runs; each untrusted run is listed with its
    reasons; queueing delay is the mean sRTT less the 20 ms base RTT."""
    runs = {name: [] for name in vm_ecn.CASES}
    runs["codel_ecn"] = [_run(15.0, 4.0), dict(_run(13.0, 6.0, rep=2, dropped=5, marks=120)),
                         _run(1.0, 1.0, rep=3, reasons=["the hypervisor stole 30 % of the CPU while it ran"])]
    entries = vm_ecn.summarize(runs)
    assert [e["case"] for e in entries] == list(vm_ecn.CASES)
    s = next(e for e in entries if e["case"] == "codel_ecn")
    assert (s["runs"], s["trusted"], s["pooled"]) == (3, 2, 2)
    assert s["untrusted_runs"] == [{"run": "rep3", "reasons": ["the hypervisor stole 30 % of the CPU while it ran"]}]
    assert s["dctcp"]["mbps"]["mean"] == 14.0 and s["cubic"]["mbps"]["mean"] == 5.0
    assert s["dctcp"]["queue_delay_ms"]["mean"] == 5.0 and s["cubic"]["queue_delay_ms"]["mean"] == 7.0
    assert s["marks"]["mean"] == 110 and s["total_mbps"]["mean"] == 19.0
    assert s["jain"]["mean"] == (19 ** 2 / (2 * (15 ** 2 + 4 ** 2)) + 19 ** 2 / (2 * (13 ** 2 + 6 ** 2))) / 2
    assert next(e for e in entries if e["case"] == "red_ecn")["runs"] == 0
    assert "| `codel_ecn` | 0.8" in "\n".join(vm_ecn.table(entries)) and "| 2 / 3 |" in "\n".join(vm_ecn.table(entries))


def test_a_run_is_untrusted_without_both_readings_on_a_disturbed_host_or_above_the_ceiling():
    """Rule (vm_ecn.run_reasons): a flow without a reading, a step measured while the hypervisor
    withheld the CPU, and together more goodput than TCP's ceiling of 20 Mbit/s each untrust a
    run; a run measured again keeps its last try."""
    body = "dctcp \"bits_per_second\":9000000 \"mean_rtt\":23000 \ncubic \"bits_per_second\":{c} \"mean_rtt\":24000 \n"
    output = "".join(f"@@RUN {name} {rep}\n{body.format(c=c)}qdisc x dropped 1 \n@@RUN-END\n"
                     for name, rep, c in (("red_ecn", 1, 1000000), ("red_ecn", 1, 9000000), ("red_ecn", 2, 11000000),
                                          ("codel_ecn", 1, 9000000), ("nosuch", 1, 9000000)))
    output += "@@RUN codel_ecn 2\ndctcp \"bits_per_second\":9000000 \"mean_rtt\":23000 \n@@RUN-END\n"
    runs = vm_ecn.parse_output(output, {"codel_ecn_rep1": 31.0})
    assert [(r["rep"], r["flows"]["cubic"]["mbps"], r["reasons"]) for r in runs["red_ecn"]] == [
        (1, 9.0, []), (2, 11.0, ["20.0 Mbit/s together is above TCP's goodput ceiling of 19.1 Mbit/s"])]
    assert [r["reasons"] for r in runs["codel_ecn"]] == [["the hypervisor stole 31 % of the CPU while it ran"],
                                                       ["no iperf3 reading of cubic"]]
    assert "nosuch" not in runs


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "vm_ecn")


def _fixture(name):
    with open(os.path.join(FIXTURES, f"{name}.txt")) as f:
        return f.read()


def test_a_runs_numbers_are_read_from_the_guests_real_output():
    """Recorded output of one 5 s run per qdisc in the kernel lab (Debian 12's 6.1, tc 6.1,
    iperf3 3.12): goodput and mean sRTT per flow, and the qdisc's marks and drops as Linux's
    red (`marked`), codel (`ecn_mark`) and sch_ckcd (`marks:` by reason) print them."""
    ckcd = vm_ecn.parse_run(_fixture("ckcd_ecn"))
    assert ckcd["flows"]["dctcp"] == {"mbps": 9.62968500934135, "srtt_ms": 23.415}
    assert ckcd["flows"]["cubic"]["srtt_ms"] == 23.45
    assert (ckcd["marks"], ckcd["dropped"]) == (1526, 322)  # 6 early + 1520 delay marks
    red = vm_ecn.parse_run(_fixture("red_ecn"))
    assert red["marks"] == int(re.search(r"marked (\d+)", _fixture("red_ecn")).group(1)) > 0
    codel = vm_ecn.parse_run(_fixture("codel_ecn"))
    assert codel["marks"] == int(re.search(r"ecn_mark (\d+)", _fixture("codel_ecn")).group(1)) > 0
    assert set(codel["flows"]) == {"dctcp", "cubic"}

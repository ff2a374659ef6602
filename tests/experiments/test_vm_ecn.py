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


def _text(cubic_bps, error=""):
    return (f'dctcp "bits_per_second":9000000 "mean_rtt":23000 \ncubic "bits_per_second":{cubic_bps} '
            f'"mean_rtt":24000 {error}\nqdisc x dropped 1 \n')


def test_a_run_is_untrusted_without_both_readings_on_a_disturbed_or_unsampled_host_or_above_the_ceiling():
    """Rule (vm_ecn.run_reasons): a flow without a reading or with iperf3's error, a run the
    host measured at STEAL_HIGH_PCT of steal or more or did not sample, and together more
    goodput than TCP's ceiling of 20 Mbit/s each untrust a run; the host's judge (invalid)
    runs again what the readings alone untrust."""
    raw = [{"case": "red_ecn", "rep": 2, "text": _text(11000000), "steal_pct": 1.0},
           {"case": "red_ecn", "rep": 1, "text": _text(9000000), "steal_pct": 9.9},
           {"case": "codel_ecn", "rep": 1, "text": _text(9000000), "steal_pct": 10.0},
           {"case": "codel_ecn", "rep": 2, "text": _text(9000000), "steal_pct": None},
           {"case": "codel_ecn", "rep": 3, "text": 'dctcp "bits_per_second":9000000 "mean_rtt":23000 \n',
            "steal_pct": 0.0},
           {"case": "codel_ecn", "rep": 4, "text": _text(9000000, '"error":"unable to connect"'), "steal_pct": 0.0}]
    runs = vm_ecn.measured_runs(raw)
    assert [(r["rep"], r["flows"]["cubic"]["mbps"], r["reasons"]) for r in runs["red_ecn"]] == [
        (1, 9.0, []), (2, 11.0, ["20.0 Mbit/s together is above TCP's goodput ceiling of 19.1 Mbit/s"])]
    assert [r["reasons"] for r in runs["codel_ecn"]] == [
        ["the hypervisor stole 10 % of the CPU while it ran"], ["the host's CPU was not sampled while it ran"],
        ["no iperf3 reading of cubic"], ["iperf3 of cubic reported: unable to connect"]]
    assert vm_ecn.invalid("red_ecn_rep2", raw[0]["text"]).endswith("ceiling of 19.1 Mbit/s")
    assert vm_ecn.invalid("red_ecn_rep1", raw[1]["text"]) is None


def test_each_run_is_read_from_its_steps_last_try():
    """Rule: a run is its measured step's output, and a step the host ran again is read from its
    last try (lab.Steps), found by step_name; every case's name can name a step (\\w+)."""
    from tests.kernel import lab

    assert all(re.fullmatch(r"\w+", vm_ecn.step_name(name, 12)) for name in vm_ecn.CASES)
    step = vm_ecn.step_name("red_ecn", 1)
    output = (f"@@BEGIN {step}\n@@RUN red_ecn 1\n{_text(1000000)}@@RUN-END\n@@END {step} rc=0\n@@ASK {step} 1\n"
              f"@@BEGIN {step}\n@@RUN red_ecn 1\n{_text(9000000)}@@RUN-END\n@@END {step} rc=0\n@@ASK {step} 2\n")
    text = lab.Steps(output=output)[step][1]
    assert vm_ecn.parse_run(text)["flows"]["cubic"]["mbps"] == 9.0


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


def test_the_kernel_lab_is_found_from_outside_the_source_tree():
    """Rule: `ckcd-coex reproduce dctcp_cubic_vm` runs from the installed package, where `tests`
    is first another package's (Flent installs one into site-packages); the kernel lab must
    still be the tree's (a lab run once failed there)."""
    import subprocess
    import sys

    code = ("import tests, sys; from experiments.lab import vm_ecn; lab = vm_ecn.kernel_lab(); "
            "print(tests.__path__[0] != sys.modules['tests'].__path__[0], lab.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == os.path.join(vm_ecn.REPO, "tests", "kernel", "lab.py"), out.stdout

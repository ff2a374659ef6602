"""The DCTCP-against-CUBIC kernel experiment's parts that need no VM (experiments/lab/vm_ecn.py):
the guest script it builds and the arithmetic of its summary. The VM run itself is an
experiment (docs/results/ecn.md), not a test."""

import os
import re

from experiments.lab import vm_ecn


def test_the_guest_runs_every_case_in_every_repeat_with_the_bands_spec_whole():
    script = vm_ecn.guest_script(repeat=2, duration_s=12)
    runs = re.findall(r"^run (\S+) (\d+) (\d+) (.*)$", script, re.M)
    assert [(n, int(r)) for n, r, _, _ in runs] == [(n, r) for r in (1, 2) for n in vm_ecn.CASES]
    for name, _, tos, qdisc in runs:
        assert qdisc == vm_ecn.CASES[name][0]
        # DCTCP carries DSCP 46 only where the bands classifier needs it
        assert int(tos) == (vm_ecn.DSCP_EF_TOS if vm_ecn.CASES[name][1] else 0)
    # the bands spec goes to tc as one argument: quoted, never through eval (its '|' would pipe)
    assert 'ckcd spec "bands map=46:1' in script and "eval" not in script
    assert "-t 12 -O 3" in script and "@RUNS@" not in script and "@DURATION@" not in script


def test_summary_means_and_queue_delay_over_the_base_rtt():
    runs = {name: [] for name in vm_ecn.CASES}
    runs["codel_ecn"] = [{"flows": {"dctcp": {"mbps": 15.0, "srtt_ms": 25.0}, "cubic": {"mbps": 4.0, "srtt_ms": 27.0}},
                          "dropped": 3, "marks": 100},
                         {"flows": {"dctcp": {"mbps": 13.0, "srtt_ms": 23.0}, "cubic": {"mbps": 6.0, "srtt_ms": 25.0}},
                          "dropped": 5, "marks": 120}]
    s = vm_ecn.summarize(runs)["codel_ecn"]
    assert s["runs"] == 2 and s["dctcp"]["mbps"]["mean"] == 14.0 and s["cubic"]["mbps"]["mean"] == 5.0
    assert s["dctcp"]["queue_delay_ms"]["mean"] == 4.0 and s["cubic"]["queue_delay_ms"]["mean"] == 6.0
    assert s["marks"]["mean"] == 110 and s["total_mbps"]["mean"] == 19.0
    assert s["jain"]["mean"] == (19 ** 2 / (2 * (15 ** 2 + 4 ** 2)) + 19 ** 2 / (2 * (13 ** 2 + 6 ** 2))) / 2
    assert vm_ecn.summarize(runs)["red_ecn"]["runs"] == 0
    assert "| `codel_ecn` | 2 |" in "\n".join(vm_ecn.table(vm_ecn.summarize(runs)))


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

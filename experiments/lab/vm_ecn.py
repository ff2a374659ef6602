"""Classic against scalable congestion control in one queue, in a real kernel: DCTCP and CUBIC
through a 20 Mbit/s bottleneck under Linux's RED and CoDel with ECN, under sch_ckcd's CKCD with
ecn=1, and under a DualQ-like split of sch_ckcd's bands (docs/ecn.md, docs/results/ecn.md).

DCTCP (Linux's tcp_dctcp, in Debian's kernel) answers CE marks in proportion to how many of its
packets were marked; CUBIC halves its window once per round trip that saw a mark. In one queue
that marks early, DCTCP therefore keeps its rate while CUBIC backs off (the problem RFC 9332's
DualQ was built for). The kernel lab (tests/kernel/lab.py) boots Debian 12's kernel under qemu
once and runs every case and repeat in it:

  namespace a (the senders: DCTCP to port 5301, CUBIC to 5302, net.ipv4.tcp_ecn=1)
  -> router r, whose egress towards b is a 20 Mbit/s HTB class with the qdisc under test
  -> b (the receivers, default congestion control dctcp: the accurate CE echo DCTCP needs;
     CUBIC's sender reacts once per round trip to it as to the classic echo), whose egress
     delays the ACKs by 20 ms (netem): a base RTT of 20 ms, a BDP of 33 packets.

Per run: each flow's goodput (iperf3's receiver, the first 3 s omitted), its mean smoothed RTT
(iperf3's sender; less the 20 ms base: the queueing delay that class saw) and the qdisc's
marks and drops. Offloads are off, so the packet limits count MTU frames.

Each run is a measured step of the kernel lab (tests/kernel/lab.py, MEASURED): the host samples
its own CPU while it runs and has it run again (at most three tries) while the hypervisor
withholds the CPU (under TCG the guest's every packet is the host's CPU) or its readings alone
untrust it. A run is trusted when both flows reported without an iperf3 error, the host sampled
its steal while it ran and found it under the experiments' STEAL_HIGH_PCT, and the two flows
together did not read above TCP's goodput ceiling of the 20 Mbit/s class; a case's means pool
its trusted runs only. What a boot measured is saved before it is read (vm_ecn.json: each
run's output and steal), and every reading judges the saved runs again (measured_runs).

    sudo .venv/bin/python -m experiments.lab.vm_ecn [--repeat 3] [--duration 20] [--out DIR]

prints the table and writes DIR/vm_ecn.out.txt (the guest's output) and DIR/vm_ecn.json;
`ckcd-coex reproduce dctcp_cubic_vm` runs it and publishes the table in docs/results/ecn.md.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import json
import os
import re
import sys

from experiments.analysis.fidelity import CEILING_TOLERANCE, GOODPUT_CEILING, STEAL_HIGH_PCT
from experiments.analysis.stats import jain_index, mean_ci95
from experiments.output.markdown import ci_cell

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_RTT_MS = 20.0
RATE_MBPS = 20.0
# What a run costs besides its seconds (iperf3's omitted 3 s, the qdisc's set-up, the report), and
# the boot, for reproduce --list's lab time: measured 2026-11-28, 15 runs of 20 s and the boot in
# 365 s in all.
RUN_OVERHEAD_S = 4.0
BOOT_S = 30.0
DSCP_EF_TOS = 0xb8  # DSCP 46 (EF) in the TOS byte: the bands case's classifier puts DCTCP in band 1

# name -> (qdisc under test as `tc qdisc add ... parent 1:1 handle 10:` takes it, does DCTCP carry DSCP 46)
CASES = {
    # sch_red with ECN and the classic parameters of the cross-check (min 15, max 45 packets, max_p 0.1)
    "red_ecn": ("red limit 121120 min 22710 max 68130 avpkt 1514 burst 48 probability 0.1 bandwidth 20mbit ecn",
                False),
    # sch_red as DCTCP's step marker (RFC 8257 section 3.1: mark every packet above K; K = 5 packets,
    # about C x RTT / 7 at 20 Mbit/s and 20 ms)
    "red_step_ecn": ("red limit 121120 min 7570 max 7571 avpkt 1514 burst 6 probability 1.0 bandwidth 20mbit ecn",
                     False),
    "codel_ecn": ("codel limit 80 target 5ms interval 100ms ecn", False),
    "ckcd_ecn": ("ckcd limit 80 rate 20mbit rtt 20ms ecn 1", False),
    # a DualQ-like split: CUBIC's classic queue (band 0, CoDel with ECN) and DCTCP's scalable one
    # (band 1, the same step marker at 5 packets), shared half and half by deficit round robin
    "bands_split": ('ckcd spec "bands map=46:1 weights=1,1 | codel limit=80 ecn=1 '
                    '| red limit=80 min=5 max=6 max_p=1 wlog=0 avpkt=1514 rate_bps=20000000 ecn=1"', True),
}

GUEST = r"""
export TC_LIB_DIR=/lab
step() { n=$1; shift; echo "@@BEGIN $n"; "$@" 2>&1; echo "@@END $n rc=$?"; }
@MEASURED@echo "@@KERNEL $(uname -r)"
insmod /lab/sch_ckcd.ko || exit 1
modprobe tcp_dctcp && modprobe tcp_bbr && modprobe sch_netem && modprobe sch_red && modprobe sch_codel || exit 1
# only the initial namespace may make a namespace's default an algorithm not in this list
sysctl -qw net.ipv4.tcp_allowed_congestion_control="reno cubic bbr dctcp" || exit 1
for n in a r b; do $IP netns add $n && $IP -n $n link set lo up || exit 1; done
$IP link add va netns a type veth peer name ra netns r && $IP link add rb netns r type veth peer name vb netns b || exit 1
$IP -n a addr add 10.8.1.1/24 dev va && $IP -n r addr add 10.8.1.254/24 dev ra &&
$IP -n r addr add 10.8.2.254/24 dev rb && $IP -n b addr add 10.8.2.1/24 dev vb || exit 1
for x in a:va r:ra r:rb b:vb; do n=${x%:*}; d=${x#*:}
  $IP -n $n link set $d up && $IP netns exec $n /usr/sbin/ethtool -K $d tso off gso off gro off || exit 1; done
$IP -n a route add default via 10.8.1.254 && $IP -n b route add default via 10.8.2.254 || exit 1
$IP netns exec r sysctl -qw net.ipv4.ip_forward=1 &&
$IP netns exec a sysctl -qw net.ipv4.tcp_ecn=1 &&
$IP netns exec b sysctl -qw net.ipv4.tcp_congestion_control=dctcp || exit 1
$IP netns exec b $TC qdisc add dev vb root netem delay 20ms limit 10000 || exit 1
$IP netns exec b iperf3 -s -D -p 5301 && $IP netns exec b iperf3 -s -D -p 5302 || exit 1
$IP netns exec a ping -c 2 -W 2 10.8.2.1 >/dev/null || exit 1
# the numbers of one iperf3 -J report: receiver bit/s, sender's mean sRTT (us)
# and iperf3's error where it gave one (its report's numbers are then not the flow's)
nums() { tr -d ' \n\t' < $1 | grep -o '"sum_received":{[^}]*}' | grep -o '"bits_per_second":[0-9.e+]*' | head -1;
         tr -d ' \n\t' < $1 | grep -o '"mean_rtt":[0-9]*' | head -1;
         tr -d '\n\t' < $1 | grep -o '"error":[[:space:]]*"[^"]*"' | head -1; }
run() {  # NAME REP TOS QDISC...
  name=$1 rep=$2 tos=$3; shift 3
  $IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 20mbit ceil 20mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: "$@" || { echo "@@FAILED $name"; return 1; }
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5301 -C dctcp -S $tos -t @DURATION@ -O 3 -J > /tmp/dctcp.json 2>&1 & d=$!
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5302 -C cubic -t @DURATION@ -O 3 -J > /tmp/cubic.json 2>&1 & c=$!
  wait $d; wait $c
  echo "@@RUN $name $rep"
  echo "dctcp $(nums /tmp/dctcp.json | tr '\n' ' ')"
  echo "cubic $(nums /tmp/cubic.json | tr '\n' ' ')"
  $IP netns exec r $TC -s -d qdisc show dev rb parent 1:1
  echo "@@RUN-END"
  $IP netns exec r $TC qdisc del dev rb root
  return 0
}
@RUNS@
"""


def guest_script(repeat: int, duration_s: int, measured: str = "") -> str:
    """The guest's script; `measured` is the kernel lab's MEASURED (each run a measured step,
    step_name), left out where no host judges the steps."""
    # case by case within a repeat, so a slow drift of the VM spreads over every case alike
    runs = "\n".join(f"measured {step_name(name, rep)} run {name} {rep} {DSCP_EF_TOS if dscp else 0} {qdisc}"
                     for rep in range(1, repeat + 1) for name, (qdisc, dscp) in CASES.items())
    return GUEST.replace("@MEASURED@", measured or "measured() { step \"$@\"; }\n").replace(
        "@RUNS@", runs).replace("@DURATION@", str(duration_s))


def step_name(case: str, rep: int) -> str:
    return f"{case}_rep{rep}"


_NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_FLOW = re.compile(rf'^(dctcp|cubic) "bits_per_second":({_NUMBER}) "mean_rtt":(\d+)', re.M)
_FLOW_ERROR = re.compile(r'^(dctcp|cubic) .*"error":\s*"([^"]*)"', re.M)


def parse_run(text: str) -> dict:
    """One run's output: per CC its goodput (Mbit/s) and mean sRTT (ms), and the qdisc's marks
    and drops (Linux's red: marked, early, pdrop; codel: ecn_mark and drops; ckcd: marks/drops
    by reason); `errors`: per CC the error iperf3 reported."""
    flows = {cc: {"mbps": float(bps) / 1e6, "srtt_ms": int(rtt) / 1000.0} for cc, bps, rtt in _FLOW.findall(text)}
    dropped = re.search(r"dropped (\d+)", text)
    marks = re.search(r"\b(?:marked|ecn_mark) (\d+)", text)
    ckcd_marks = re.search(r"marks:((?: [\w-]+ \d+)+)", text)
    if ckcd_marks:
        toks = ckcd_marks.group(1).split()
        n_marks = sum(int(toks[i + 1]) for i in range(0, len(toks), 2))
    else:
        n_marks = int(marks.group(1)) if marks else 0
    return {"flows": flows, "errors": dict(_FLOW_ERROR.findall(text)),
            "dropped": int(dropped.group(1)) if dropped else None, "marks": n_marks}


def measured_runs(raw: list[dict]) -> dict[str, list[dict]]:
    """Per case (CASES's order) its runs by repeat, each read from what the VM saved of it
    (`raw`: case, rep, the step's output `text` of its last try, the host's steal while it ran
    `steal_pct`) and judged (`reasons`, module docstring): the same reading for a run just
    measured and one loaded from vm_ecn.json, so a saved file's verdicts are never taken on trust."""
    runs: dict[str, list[dict]] = {name: [] for name in CASES}
    for r in sorted(raw, key=lambda r: r["rep"]):
        run = dict(parse_run(r["text"]), rep=r["rep"])
        run["reasons"] = run_reasons(run, r["steal_pct"])
        runs[r["case"]].append(run)
    return runs


def run_reasons(run: dict, steal_pct: float | None) -> list[str]:
    """Why a run is not trusted: a flow without a reading or with iperf3's error, a host that
    withheld the CPU while it ran (or was not sampled), or together a goodput above TCP's
    ceiling of the class's rate."""
    missing = [cc for cc in ("dctcp", "cubic") if cc not in run["flows"]]
    reasons = [f"no iperf3 reading of {cc}" for cc in missing]
    reasons += [f"iperf3 of {cc} reported: {err}" for cc, err in sorted(run.get("errors", {}).items())]
    if steal_pct is None:
        reasons.append("the host's CPU was not sampled while it ran")
    elif steal_pct >= STEAL_HIGH_PCT:
        reasons.append(f"the hypervisor stole {steal_pct:.0f} % of the CPU while it ran")
    if not missing:
        total = sum(f["mbps"] for f in run["flows"].values())
        if total > RATE_MBPS * (GOODPUT_CEILING + CEILING_TOLERANCE):
            reasons.append(f"{total:.1f} Mbit/s together is above TCP's goodput ceiling of "
                           f"{RATE_MBPS * GOODPUT_CEILING:.1f} Mbit/s")
    return reasons


def invalid(step: str, output: str) -> str | None:
    """The host's judge of a measured step (lab.run's `invalid`): a run without both readings,
    with iperf3's error or above the ceiling runs again, as one on a disturbed host does."""
    reasons = run_reasons(parse_run(output), 0.0)
    return reasons[0] if reasons else None


def summarize(runs: dict[str, list[dict]]) -> list[dict]:
    """Per case, in CASES's order, over its trusted runs: Jain's index of the two flows, each
    flow's goodput and queueing delay (mean sRTT less the base RTT), the total, marks and drops
    (mean and 95 % CI); the runs left out and why."""
    out = []
    for name, rs in runs.items():
        ok = [r for r in rs if not r["reasons"]]
        per = lambda f: mean_ci95([f(r) for r in ok])  # noqa: E731
        entry = {"case": name, "qdisc": CASES[name][0], "runs": len(rs), "trusted": len(ok), "pooled": len(ok),
                 "includes_untrusted": False, "failed": 0, "errors": [],
                 "untrusted_runs": [{"run": f"rep{r['rep']}", "reasons": r["reasons"]} for r in rs if r["reasons"]],
                 "jain": per(lambda r: jain_index([r["flows"]["dctcp"]["mbps"], r["flows"]["cubic"]["mbps"]])),
                 "total_mbps": per(lambda r: r["flows"]["dctcp"]["mbps"] + r["flows"]["cubic"]["mbps"]),
                 "marks": per(lambda r: r["marks"]), "drops": per(lambda r: r["dropped"])}
        for cc in ("dctcp", "cubic"):
            entry[cc] = {"mbps": per(lambda r, cc=cc: r["flows"][cc]["mbps"]),
                         "queue_delay_ms": per(lambda r, cc=cc: r["flows"][cc]["srtt_ms"] - BASE_RTT_MS)}
        out.append(entry)
    return out


def table(entries: list[dict]) -> list[str]:
    lines = ["| case | Jain | DCTCP Mbit/s | CUBIC Mbit/s | total | DCTCP queue delay ms | "
             "CUBIC queue delay ms | marks | drops | trusted / runs |", "|" + "---|" * 10]
    for e in entries:
        lines.append(f"| `{e['case']}` | {ci_cell(e['jain'], 3)} | {ci_cell(e['dctcp']['mbps'])} | "
                     f"{ci_cell(e['cubic']['mbps'])} | {ci_cell(e['total_mbps'])} | {ci_cell(e['dctcp']['queue_delay_ms'])} | "
                     f"{ci_cell(e['cubic']['queue_delay_ms'])} | {ci_cell(e['marks'], 0)} | {ci_cell(e['drops'], 0)} | "
                     f"{e['trusted']} / {e['runs']} |")
    return lines


def case_list() -> list[str]:
    """What each case's qdisc is, as tc takes it (the published table's key to its rows)."""
    return [f"- `{name}`: `{qdisc}`" + (" (DCTCP marked DSCP 46)" if dscp else "") for name, (qdisc, dscp) in CASES.items()]


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def minutes(repeat: int, duration_s: float) -> float:
    return (BOOT_S + repeat * len(CASES) * (duration_s + RUN_OVERHEAD_S)) / 60


def kernel_lab():
    """The kernel lab (tests/kernel/lab.py: it boots the VM), from the source tree. `ckcd-coex`
    runs from the installed package, where the name `tests` is a top-level package that Flent
    and tinyrpc install into site-packages: this process's `tests` is made the tree's first."""
    here = os.path.join(REPO, "tests")
    if os.path.realpath(getattr(sys.modules.get("tests"), "__path__", [""])[0]) != os.path.realpath(here):
        spec = importlib.util.spec_from_file_location("tests", os.path.join(here, "__init__.py"),
                                                      submodule_search_locations=[here])
        module = importlib.util.module_from_spec(spec)
        sys.modules["tests"] = module
        spec.loader.exec_module(module)
    from tests.kernel import lab

    return lab


def measure(repeat: int, duration_s: int, out_dir: str) -> dict:
    """Boot the kernel lab once (under the lab lock), run every case `repeat` times and save
    what it measured in out_dir (vm_ecn.out.txt: the guest's output; vm_ecn.json: save's) before
    anything reads it: the saved data (load's). Raises RuntimeError when the VM's script failed,
    after saving the runs it finished."""
    from experiments.batch.provenance import collect
    from ovs_config.lablock import lab_lock

    lab = kernel_lab()
    os.makedirs(out_dir, exist_ok=True)
    if not os.access(out_dir, os.W_OK):
        raise RuntimeError(f"{out_dir}: not writable: the VM's runs would be lost")
    ko, so = lab.build_sch_ckcd(REPO)
    n = repeat * len(CASES)
    print(f"kernel lab: {len(CASES)} cases x {repeat} runs of {duration_s} s "
          f"(about {minutes(repeat, duration_s):.0f} min with the boot)", flush=True)
    created, provenance = now_iso(), collect()
    with lab_lock():  # the VM takes a core: no other lab beside it
        res = lab.run(guest_script(repeat, duration_s, lab.MEASURED), {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so},
                      timeout_s=180 + n * (duration_s + 15) * lab.MEASURE_TRIES,
                      modules=lab.DEFAULT_MODULES + ("tcp_dctcp",), invalid=invalid)
    with open(os.path.join(out_dir, "vm_ecn.out.txt"), "w") as f:
        f.write(res.output or res.console)
    steps = lab.Steps(res)
    raw = [{"case": name, "rep": rep, "text": steps[step_name(name, rep)][1],
            "steal_pct": res.steal_pct(step_name(name, rep))}
           for rep in range(1, repeat + 1) for name in CASES if step_name(name, rep) in steps]
    kernel = re.search(r"^@@KERNEL (\S+)", res.output, re.M)
    saved = {"created": created, "cases": {k: v[0] for k, v in CASES.items()}, "duration_s": duration_s,
             "kernel": kernel.group(1) if kernel else None, "provenance": provenance, "runs": raw}
    save(out_dir, saved)
    if res.exit_status != 0 or "@@FAILED" in res.output:
        raise RuntimeError(f"the VM's script failed (exit {res.exit_status}); its output is in "
                           f"{out_dir}/vm_ecn.out.txt, the {len(raw)} runs it finished in {out_dir}/vm_ecn.json")
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of every case (default 3)")
    ap.add_argument("--duration", type=int, default=20, help="seconds per run, the first 3 omitted (default 20)")
    ap.add_argument("--out", default="results/vm_ecn", help="where vm_ecn.json goes (default results/vm_ecn)")
    args = ap.parse_args(argv)
    if args.repeat < 1 or not 5 <= args.duration <= 300:
        ap.error("--repeat must be at least 1 and --duration between 5 and 300 s")
    try:
        saved = measure(args.repeat, args.duration, args.out)
    except (OSError, RuntimeError) as err:
        print(err, file=sys.stderr)
        return 1
    entries = summarize(measured_runs(saved["runs"]))
    print("\n".join(table(entries)))
    return 0 if all(e["trusted"] == args.repeat for e in entries) else 1


def save(out_dir: str, saved: dict) -> str:
    """DIR/vm_ecn.json: when it ran and on what (provenance, the guest's kernel), the cases, the
    run length and every run as measured (measured_runs reads them)."""
    path = os.path.join(out_dir, "vm_ecn.json")
    with open(path, "w") as f:
        json.dump(saved, f, indent=1)
    return path


_SAVED_KEYS = {"created": str, "cases": dict, "duration_s": int, "provenance": dict, "runs": list}
_RAW_KEYS = {"case": str, "rep": int, "text": str}


def load(out_dir: str) -> dict:
    """DIR/vm_ecn.json as save wrote it. Raises ValueError naming what is wrong when it is not
    one of this version's cases, or a key is missing or of the wrong type."""
    where = os.path.join(out_dir, "vm_ecn.json")
    with open(where) as f:
        saved = json.load(f)
    if not isinstance(saved, dict):
        raise ValueError(f"{where}: not an object")
    for key, kind in _SAVED_KEYS.items():
        if not isinstance(saved.get(key), kind):
            raise ValueError(f"{where}: {key}: missing or not a {kind.__name__}")
    if saved["cases"] != {k: v[0] for k, v in CASES.items()}:
        raise ValueError(f"{where}: cases: not this version's cases (experiments/lab/vm_ecn.py, CASES)")
    seen = set()
    for i, r in enumerate(saved["runs"]):
        bad = [k for k, kind in _RAW_KEYS.items() if not isinstance(r, dict) or not isinstance(r.get(k), kind)]
        if bad or not isinstance(r.get("steal_pct", 0), (int, float, type(None))) or r["case"] not in CASES:
            raise ValueError(f"{where}: runs[{i}]: {', '.join(bad) or 'case or steal_pct'} missing or wrong")
        if (r["case"], r["rep"]) in seen:
            raise ValueError(f"{where}: runs[{i}]: {r['case']} rep {r['rep']} twice")
        seen.add((r["case"], r["rep"]))
    return saved


def summary_csv(path: str, entries: list[dict]) -> None:
    """The published summary's CSV: a row per case, each mean and its CI half-width."""
    stats = [("jain", lambda e: e["jain"]), ("total_mbps", lambda e: e["total_mbps"]),
             ("dctcp_mbps", lambda e: e["dctcp"]["mbps"]), ("cubic_mbps", lambda e: e["cubic"]["mbps"]),
             ("dctcp_queue_delay_ms", lambda e: e["dctcp"]["queue_delay_ms"]),
             ("cubic_queue_delay_ms", lambda e: e["cubic"]["queue_delay_ms"]),
             ("marks", lambda e: e["marks"]), ("drops", lambda e: e["drops"])]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "qdisc", "runs", "trusted"] + [c for name, _ in stats for c in (name, f"{name}_ci95")])
        for e in entries:
            w.writerow([e["case"], e["qdisc"], e["runs"], e["trusted"]]
                       + [v for _, read in stats for v in (read(e)["mean"], read(e)["ci95"])])


if __name__ == "__main__":
    sys.exit(main())

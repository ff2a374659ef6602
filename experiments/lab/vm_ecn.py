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

    sudo .venv/bin/python -m experiments.lab.vm_ecn [--repeat 3] [--duration 20] [--out DIR]

prints the table docs/results/ecn.md holds and writes DIR/vm_ecn.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from experiments.analysis.stats import jain_index, mean_ci95

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_RTT_MS = 20.0
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
nums() { tr -d ' \n\t' < $1 | grep -o '"sum_received":{[^}]*}' | grep -o '"bits_per_second":[0-9.e+]*' | head -1;
         tr -d ' \n\t' < $1 | grep -o '"mean_rtt":[0-9]*' | head -1; }
run() {  # NAME REP TOS QDISC...
  name=$1 rep=$2 tos=$3; shift 3
  $IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 20mbit ceil 20mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: "$@" || { echo "@@FAILED $name"; return; }
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5301 -C dctcp -S $tos -t @DURATION@ -O 3 -J > /tmp/dctcp.json 2>&1 & d=$!
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5302 -C cubic -t @DURATION@ -O 3 -J > /tmp/cubic.json 2>&1 & c=$!
  wait $d; wait $c
  echo "@@RUN $name $rep"
  echo "dctcp $(nums /tmp/dctcp.json | tr '\n' ' ')"
  echo "cubic $(nums /tmp/cubic.json | tr '\n' ' ')"
  $IP netns exec r $TC -s -d qdisc show dev rb parent 1:1
  echo "@@END"
  $IP netns exec r $TC qdisc del dev rb root
}
@RUNS@
"""


def guest_script(repeat: int, duration_s: int) -> str:
    # case by case within a repeat, so a slow drift of the VM spreads over every case alike
    runs = "\n".join(f"run {name} {rep} {DSCP_EF_TOS if dscp else 0} {qdisc}"
                     for rep in range(1, repeat + 1) for name, (qdisc, dscp) in CASES.items())
    return GUEST.replace("@RUNS@", runs).replace("@DURATION@", str(duration_s))


_FLOW = re.compile(r'^(dctcp|cubic) "bits_per_second":([0-9.e+]+) "mean_rtt":(\d+)', re.M)


def parse_run(text: str) -> dict:
    """One run's output: per CC its goodput (Mbit/s) and mean sRTT (ms), and the qdisc's marks
    and drops (Linux's red: marked, early, pdrop; codel: ecn_mark and drops; ckcd: marks/drops
    by reason)."""
    flows = {cc: {"mbps": float(bps) / 1e6, "srtt_ms": int(rtt) / 1000.0} for cc, bps, rtt in _FLOW.findall(text)}
    dropped = re.search(r"dropped (\d+)", text)
    marks = re.search(r"\b(?:marked|ecn_mark) (\d+)", text)
    ckcd_marks = re.search(r"marks:((?: [\w-]+ \d+)+)", text)
    if ckcd_marks:
        toks = ckcd_marks.group(1).split()
        n_marks = sum(int(toks[i + 1]) for i in range(0, len(toks), 2))
    else:
        n_marks = int(marks.group(1)) if marks else 0
    return {"flows": flows, "dropped": int(dropped.group(1)) if dropped else None, "marks": n_marks, "text": text}


def parse_output(output: str) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {name: [] for name in CASES}
    for m in re.finditer(r"^@@RUN (\S+) (\d+)\n(.*?)^@@END", output, re.S | re.M):
        run = parse_run(m.group(3))
        if set(run["flows"]) == {"dctcp", "cubic"}:
            runs[m.group(1)].append(run)
    return runs


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per case, over its repeats: Jain's index of the two flows, each flow's goodput and
    queueing delay (mean sRTT less the base RTT), the total, marks and drops (mean and 95 % CI)."""
    out = {}
    for name, rs in runs.items():
        per = lambda f: mean_ci95([f(r) for r in rs])  # noqa: E731
        out[name] = {"runs": len(rs),
                     "jain": per(lambda r: jain_index([r["flows"]["dctcp"]["mbps"], r["flows"]["cubic"]["mbps"]])),
                     "total_mbps": per(lambda r: r["flows"]["dctcp"]["mbps"] + r["flows"]["cubic"]["mbps"]),
                     "marks": per(lambda r: r["marks"]), "drops": per(lambda r: r["dropped"])}
        for cc in ("dctcp", "cubic"):
            out[name][cc] = {"mbps": per(lambda r, cc=cc: r["flows"][cc]["mbps"]),
                             "queue_delay_ms": per(lambda r, cc=cc: r["flows"][cc]["srtt_ms"] - BASE_RTT_MS)}
    return out


def _ci(v: dict, digits: int = 1) -> str:
    if v["mean"] is None:
        return "n/a"
    return f"{v['mean']:.{digits}f}" + (f" ± {v['ci95']:.{digits}f}" if v["ci95"] is not None else "")


def table(summary: dict) -> list[str]:
    lines = ["| case | runs | Jain | DCTCP Mbit/s | CUBIC Mbit/s | total | DCTCP queue delay ms | "
             "CUBIC queue delay ms | marks | drops |", "|" + "---|" * 10]
    for name, s in summary.items():
        lines.append(f"| `{name}` | {s['runs']} | {_ci(s['jain'], 3)} | {_ci(s['dctcp']['mbps'])} | "
                     f"{_ci(s['cubic']['mbps'])} | {_ci(s['total_mbps'])} | {_ci(s['dctcp']['queue_delay_ms'])} | "
                     f"{_ci(s['cubic']['queue_delay_ms'])} | {_ci(s['marks'], 0)} | {_ci(s['drops'], 0)} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of every case (default 3)")
    ap.add_argument("--duration", type=int, default=20, help="seconds per run, the first 3 omitted (default 20)")
    ap.add_argument("--out", default="results/vm_ecn", help="where vm_ecn.json goes (default results/vm_ecn)")
    args = ap.parse_args(argv)
    if args.repeat < 1 or not 5 <= args.duration <= 300:
        ap.error("--repeat must be at least 1 and --duration between 5 and 300 s")
    from ovs_config.lablock import lab_lock
    from tests.kernel import lab

    ko, so = lab.build_sch_ckcd(REPO)
    n = args.repeat * len(CASES)
    print(f"kernel lab: {len(CASES)} cases x {args.repeat} runs of {args.duration} s "
          f"(about {n * (args.duration + 3) / 60:.0f} min after the boot)", flush=True)
    with lab_lock():  # the VM takes a core: no other lab beside it
        res = lab.run(guest_script(args.repeat, args.duration), {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so},
                      timeout_s=180 + n * (args.duration + 15), modules=lab.DEFAULT_MODULES + ("tcp_dctcp",))
    if res.exit_status != 0 or "@@FAILED" in res.output:
        print(f"the VM's script failed (exit {res.exit_status}):\n" + (res.output[-4000:] or res.console[-4000:]),
              file=sys.stderr)
        return 1
    runs = parse_output(res.output)
    summary = summarize(runs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "vm_ecn.json"), "w") as f:
        json.dump({"cases": {k: v[0] for k, v in CASES.items()}, "duration_s": args.duration,
                   "runs": runs, "summary": summary}, f, indent=1)
    print("\n".join(table(summary)))
    return 0 if all(s["runs"] == args.repeat for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

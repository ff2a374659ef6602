"""What sch_ckcd costs a packet in a real kernel, against Linux's own pfifo, in one VM run.

The kernel lab (tests/kernel/lab.py) boots Debian 12's kernel under qemu and loads the module
as DKMS builds it. tests/kernel/perpacket.sh sends 3 s of unlimited-rate 100-byte UDP through
a veth whose root qdisc is, in turn, `pfifo limit 1000`, `ckcd limit 1000` and `ckcd disc
droptail limit 1000`, interleaved over ROUNDS rounds; tc counts the packets each one sent.
The ratio of a qdisc's mean to pfifo's is the number to watch: under TCG the whole packet
path runs at a few thousand packets/s, so the qdisc is a small part of it and rounds spread
(docs/kernel.md, "Measured").

    sudo .venv/bin/python bench/bench_kernel_perpacket.py [--rounds 5] [--update-baseline]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchlib import machine, save, side_by_side  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from tests.kernel import lab  # noqa: E402

SCRIPT = os.path.join(REPO, "tests", "kernel", "perpacket.sh")
LINE = re.compile(r"^(?P<qdisc>[^|]+?) \| Sent \d+ bytes (?P<pkts>\d+) pkt", re.M)
NAMES = {"pfifo limit 1000": "pfifo", "ckcd limit 1000": "ckcd", "ckcd disc droptail limit 1000": "ckcd_droptail"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the three qdiscs (default 5)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    with open(SCRIPT) as f:
        script = f.read().replace("for round in 1 2 3; do", f"for round in $(seq {args.rounds}); do")
    ko, so = lab.build_sch_ckcd(REPO)
    print(f"kernel lab: {args.rounds} rounds of 3 qdiscs x 3 s", flush=True)
    with lab_lock():  # the VM takes a core: no other lab beside it
        res = lab.run(script, {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so}, timeout_s=120 + 15 * args.rounds)
    if res.exit_status is None:
        print(res.console[-3000:])
        return 1
    pkts: dict[str, list[int]] = {name: [] for name in NAMES.values()}
    for m in LINE.finditer(res.output):
        pkts[NAMES[m.group("qdisc").strip()]].append(int(m.group("pkts")))
    if any(len(v) != args.rounds for v in pkts.values()):
        print(res.output)
        return 1
    means = {k: statistics.mean(v) for k, v in pkts.items()}
    flat = {f"{k}_pkts_per_3s_mean": round(v) for k, v in means.items()}
    flat.update({f"{k}_vs_pfifo": round(means[k] / means["pfifo"], 3) for k in ("ckcd", "ckcd_droptail")})
    doc = {"machine": machine(), "rounds": args.rounds, "pkts_per_3s": pkts, **flat}
    base = save("kernel_perpacket", doc, args.update_baseline)
    side_by_side(flat, base, base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

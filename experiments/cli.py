"""`ckcd-coex`: the lab's command line.

  ckcd-coex demo     bring up the lab, run the short comparison, print the table, tear down
  ckcd-coex clean    remove what a crashed run left: private OVS, controller, Mininet leftovers
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_demo(args) -> int:
    from experiments.demo import run_demo

    return run_demo(duration_s=args.duration, out_dir=args.out)


def cmd_clean(args) -> int:
    from ovs_config.private_ovs import PrivateOVS

    ovs = PrivateOVS()
    if ovs.running():
        os.environ.update(ovs.env())
        # Mininet's cleanup, pointed at our OVS by the environment: bridges, veths, its processes.
        subprocess.run(["mn", "-c"], capture_output=True)
    ovs.stop()
    subprocess.run(["pkill", "-f", "ryu-manager .*ckcd_coex"], capture_output=True)
    print("clean: private OVS stopped, controller and Mininet leftovers removed")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ckcd-coex", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="short BBR-vs-CUBIC run with a printed table and a report")
    demo.add_argument("--duration", type=float, default=10.0, help="seconds per traffic run (default 10)")
    demo.add_argument("--out", default="results/demo", help="report directory (default results/demo)")
    demo.set_defaults(func=cmd_demo)
    clean = sub.add_parser("clean", help="stop and remove everything a lab run may have left")
    clean.set_defaults(func=cmd_clean)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("ckcd-coex: must run as root (Mininet, Open vSwitch, namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)  # teardown runs on kill as on Ctrl-C
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("ckcd-coex: interrupted; the lab was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

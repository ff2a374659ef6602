"""Put ckcd-link between two switch ports: the bottleneck of our machines.

    s1 port 3 = s1-l0 <veth> l0-a  [ckcd-link: rate, delay, AQM]  l0-b <veth> s2-l0 = s2 port 3

The daemon's direction "ab" carries what s1 sends out of its port (l0-a receives it),
"ba" what s2 sends. Each switch-side Interface records in OVSDB which daemon serves it
and in which direction (external_ids ckcd-link-ctl, ckcd-link-dir), so the controller
can attach an AQM to "port 3 of s1" without knowing how the lab was built.
"""

from __future__ import annotations

import os
import subprocess

from ovs_config.link_daemon import LinkDaemon
from ovs_config.private_ovs import remove_leftover_interface

RUN_DIR = "/run/ckcd-coex"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _offloads_off(dev: str) -> None:
    subprocess.run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    "rx", "off"], capture_output=True)


class SwitchLink:
    def __init__(self, bridge_a: str, ofport_a: int, bridge_b: str, ofport_b: int, *, rate_bps: int,
                 delay_ms: float, qdisc: str = "droptail limit=80", qdisc_ba: str | None = None,
                 name: str = "l0", log_path: str | None = None, log_interval_ms: int | None = None,
                 seed: int | None = None, release_batch_us: float = 0.0,
                 release_lateness_us: float = 0.0, host_delay_ms: dict[str, float] | None = None,
                 **daemon_options):
        """daemon_options: more of ovs_config.link_daemon.LinkDaemon's keywords (traces, loss, the
        ba direction's rate and delay)."""
        self.ends = [(bridge_a, ofport_a, f"{bridge_a}-{name}", f"{name}-a", "ab"),
                     (bridge_b, ofport_b, f"{bridge_b}-{name}", f"{name}-b", "ba")]
        for _, _, switch_dev, link_dev, _ in self.ends:
            if len(switch_dev) > 15 or len(link_dev) > 15:
                raise ValueError(f"interface name {switch_dev!r} is over 15 characters: shorten name")
        self.control_path = os.path.join(RUN_DIR, f"link-{name}.sock")
        self.daemon = LinkDaemon(f"{name}-a", f"{name}-b", rate_bps=rate_bps, delay_ms=delay_ms,
                                 qdisc=qdisc, qdisc_ba=qdisc_ba, control_path=self.control_path,
                                 log_path=log_path, log_interval_ms=log_interval_ms, seed=seed,
                                 release_batch_us=release_batch_us,
                                 release_lateness_us=release_lateness_us, host_delay_ms=host_delay_ms,
                                 **daemon_options)

    def start(self) -> "SwitchLink":
        os.makedirs(RUN_DIR, exist_ok=True)
        try:
            for bridge, ofport, switch_dev, link_dev, direction in self.ends:
                for dev in (switch_dev, link_dev):
                    remove_leftover_interface(dev)
                _ip("link", "add", switch_dev, "type", "veth", "peer", "name", link_dev)
                for dev in (switch_dev, link_dev):
                    _ip("link", "set", dev, "up")
                    _offloads_off(dev)
            self.daemon.start()
            for bridge, ofport, switch_dev, link_dev, direction in self.ends:
                subprocess.run(["ovs-vsctl", "--timeout=10", "add-port", bridge, switch_dev, "--", "set",
                                "Interface", switch_dev, f"ofport_request={ofport}",
                                f"external_ids:ckcd-link-ctl={self.control_path}",
                                f"external_ids:ckcd-link-dir={direction}"], check=True, capture_output=True)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> dict | None:
        final = self.daemon.stop() if self.daemon.alive() else None
        for bridge, _, switch_dev, _, _ in self.ends:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-port", bridge, switch_dev],
                           capture_output=True)
            subprocess.run(["ip", "link", "del", switch_dev], capture_output=True)
        return final

    def __enter__(self) -> "SwitchLink":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

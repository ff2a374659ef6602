"""A switch host in the kernel lab: Open vSwitch on the kernel datapath, managed over the network.

The VM (tests/kernel/lab.py's Vm) boots Debian 12's kernel with openvswitch.ko and runs the
host's own ovsdb-server and ovs-vswitchd (Open vSwitch 3.1) with one bridge s1 (dpid 1):

    h1 10.0.0.1 --- s1-eth1 (1)
    h2 10.0.0.2 --- s1-eth2 (2)   s1   (3) s1-eth3 --- h3 10.0.0.3   <- the bottleneck port
    netem 20 ms on h1's and h2's egress (the data direction, before the switch)

Each host is a network namespace behind a veth pair (offloads off, so a packet limit counts
MTU frames). The bottleneck gets its rate from whatever the controller puts on s1-eth3: HTB
at the port's capacity with the discipline as its leaf (sch_ckcd through ckcd-qdisc-agent),
or OVS's own linux-htb for Separate Queues. 20 Mbit/s is what the emulated CPU sustains with
room to spare (measured 2026-11-24, one CUBIC flow through OVS and HTB: 18.7 Mbit/s goodput
at 20 Mbit/s with the vCPU about half busy, 37.5 at 40 Mbit/s with it two-thirds busy).

The controller runs on the host and reaches the switch host only over qemu's user network,
as it would reach a real one: the switch connects to tcp:10.0.2.2:OF_PORT (the host as the
guest sees it), the controller configures it through OVSDB at tcp:127.0.0.1:OVSDB_PORT
(forwarded to the guest's ovsdb-server, opened by `ovs-vsctl set-manager ptcp:6640`), and
the guest's sFlow agent sends to 10.0.2.2:SFLOW_PORT, the embedded collector on the host's
loopback.
"""

from __future__ import annotations

import os
import re

from tests.kernel import lab

OF_PORT, REST_PORT, OVSDB_PORT, SFLOW_PORT, COMMAND_PORT = 16653, 18081, 16640, 16344, 17001
OVSDB_REMOTE = f"tcp:127.0.0.1:{OVSDB_PORT}"
GUEST_COLLECTOR = f"{lab.HOST_FROM_GUEST}:{SFLOW_PORT}"
LINK_BPS = 20_000_000
BASE_RTT_MS = 20
DPID = 1

OVS_PROGRAMS = ("/usr/sbin/ovs-vswitchd", "/usr/sbin/ovsdb-server", "/usr/bin/ovs-vsctl",
                "/usr/bin/ovsdb-tool", "/usr/bin/ovs-ofctl", "/usr/bin/ovs-appctl", "/usr/bin/ovs-dpctl")
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
# openvswitch.ko needs libcrc32c, whose crc32c comes from crc32c_generic (a soft dependency
# modprobe does not follow); virtio for qemu's network card.
OVS_MODULES = lab.DEFAULT_MODULES + ("crc32c_generic", "openvswitch", "virtio_pci", "virtio_net")

BOOT = rf"""
modprobe crc32c_generic && modprobe openvswitch && modprobe sch_htb && modprobe sch_netem &&
modprobe tcp_bbr && insmod /lab/sch_ckcd.ko || exit 1
mkdir -p /etc/openvswitch /var/run/openvswitch /var/log/openvswitch
ovsdb-tool create /etc/openvswitch/conf.db {OVS_SCHEMA} || exit 1
# As Debian's ovs-ctl starts it: the managers in the database are its remotes, so the
# set-manager line of docs/real-switches.md is what opens OVSDB to the controller.
ovsdb-server --remote=punix:/var/run/openvswitch/db.sock \
  --remote=db:Open_vSwitch,Open_vSwitch,manager_options --pidfile --detach --log-file || exit 1
# OVS 3.1 first counts the CPUs when its monotonic clock reaches 10 s (boot time here): before
# that it sizes per-CPU upcall dispatch for 0 handler threads and every upcall is lost.
while [ "$(cut -d. -f1 /proc/uptime)" -lt 11 ]; do sleep 0.2; done
ovs-vsctl --no-wait init && ovs-vsctl --no-wait set-manager ptcp:6640 &&
ovs-vswitchd --pidfile --detach --log-file || exit 1
ovs-vsctl add-br s1 -- set bridge s1 other-config:datapath-id={DPID:016x} protocols=OpenFlow13 \
  fail_mode=secure || exit 1
for i in 1 2 3; do
  $IP netns add h$i && $IP -n h$i link set lo up &&
  $IP link add s1-eth$i type veth peer name eth0 netns h$i &&
  $IP -n h$i addr add 10.0.0.$i/24 dev eth0 && $IP -n h$i link set eth0 up && $IP link set s1-eth$i up &&
  ethtool -K s1-eth$i tso off gso off gro off && $IP netns exec h$i ethtool -K eth0 tso off gso off gro off &&
  ovs-vsctl add-port s1 s1-eth$i -- set interface s1-eth$i ofport_request=$i || exit 1
done
# The base RTT on the senders' egress, the data direction. Not on h3's ACKs: netem orphans the
# skbs it delays, and so it must sit before the switch - a sender's skb that reaches the
# bottleneck still owned by its socket counts against TCP Small Queues, which then paces each
# sender at its share and no queue (no drop, no unfairness) ever forms at the bottleneck.
for i in 1 2; do $IP netns exec h$i $TC qdisc add dev eth0 root netem delay {BASE_RTT_MS}ms limit 10000 || exit 1; done
for p in 5301 5302 5303; do $IP netns exec h3 iperf3 -s -D -p $p || exit 1; done
TC=/usr/sbin/tc TC_LIB_DIR=/lab setsid sh /lab/ckcd-qdisc-agent --interval 1 > /tmp/agent.log 2>&1 &
ovs-vsctl set-controller s1 tcp:{lab.HOST_FROM_GUEST}:{OF_PORT} || exit 1
"""


def start_vm(repo: str) -> lab.Vm:
    ko, so = lab.build_sch_ckcd(repo)
    files = {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so,
             "lab/ckcd-qdisc-agent": os.path.join(repo, "datapath", "kernel", "ckcd-qdisc-agent")}
    return lab.Vm(files=files, modules=OVS_MODULES, programs=lab.HOST_PROGRAMS + OVS_PROGRAMS,
                  data_files=(OVS_SCHEMA,), forwards={OVSDB_PORT: 6640}, command_port=COMMAND_PORT,
                  boot_script=BOOT).start()


def tc_show(vm: lab.Vm, what: str = "qdisc") -> str:
    return vm.check(f"TC_LIB_DIR=/lab $TC -s {what} show dev s1-eth3")


def flows(vm: lab.Vm) -> str:
    return vm.check("ovs-ofctl -O OpenFlow13 dump-flows s1")


def two_flows(vm: lab.Vm, cc_a: str, cc_b: str, seconds: int, src_b: str = "h2") -> dict[str, float]:
    """Two iperf3 flows to h3 at once, h1 (port 5301, cc_a) and src_b (5302, cc_b); their
    receiver goodputs in Mbit/s, keyed "a" and "b"."""
    out = vm.check(f"""
$IP netns exec h1 iperf3 -c 10.0.0.3 -p 5301 -C {cc_a} -t {seconds} -f m > /tmp/a.txt 2>&1 &
$IP netns exec {src_b} iperf3 -c 10.0.0.3 -p 5302 -C {cc_b} -t {seconds} -f m > /tmp/b.txt 2>&1 &
wait
echo "== a"; cat /tmp/a.txt; echo "== b"; cat /tmp/b.txt
""", timeout_s=seconds + 60)
    rates = {}
    for name in ("a", "b"):
        part = out.split(f"== {name}")[1]
        m = re.search(r"([\d.]+) Mbits/sec\s+receiver", part)
        assert m, f"flow {name} has no receiver line:\n{out}"
        rates[name] = float(m.group(1))
    return rates


def jain(rates) -> float:
    xs = list(rates.values()) if isinstance(rates, dict) else list(rates)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))

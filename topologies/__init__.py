"""Mininet topologies of the papers' testbeds (each file also works with `mn --custom`)."""

import subprocess


def offloads_off(net) -> None:
    """Turn every offload off on every host and switch interface of a started net.

    Through the userspace datapath, TCP needs host tx checksumming off, and GRO on
    switch-side veths drops all TCP; with TSO/GSO on, "80 packets" of queue can be
    megabytes. Experiments and tests therefore run with MTU-sized frames only.
    """
    for node in net.hosts + net.switches:
        for intf in node.intfList():
            if intf.name == "lo":
                continue
            args = ["ethtool", "-K", intf.name, "tso", "off", "gso", "off", "gro", "off",
                    "tx", "off", "rx", "off"]
            if node in net.hosts:
                node.cmd(" ".join(args) + " >/dev/null 2>&1")
            else:
                subprocess.run(args, capture_output=True, check=False)

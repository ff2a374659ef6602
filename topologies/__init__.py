"""Mininet topologies of the papers' testbeds (each file also works with `mn --custom`)."""

import subprocess

from mininet.node import Host

OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off")


def intf_offloads_off(intf) -> None:
    """Turn every offload off on one interface, in its node's namespace.

    Through the userspace datapath, TCP needs host tx checksumming off, and GRO on
    switch-side veths drops all TCP; with TSO/GSO on, "80 packets" of queue can be
    megabytes. Experiments and tests therefore run with MTU-sized frames only.
    """
    args = ["ethtool", "-K", intf.name, *OFFLOADS_OFF]
    if intf.node.inNamespace:
        intf.node.cmd(" ".join(args) + " >/dev/null 2>&1")
    else:  # a switch's ports live in the root namespace
        subprocess.run(args, capture_output=True, check=False)


def offloads_off(net) -> None:
    """Turn every offload off on every host and switch interface of a started net."""
    for node in net.hosts + net.switches:
        for intf in node.intfList():
            if intf.name != "lo":
                intf_offloads_off(intf)


class OffloadsOffHost(Host):
    """A host that, once configured, has turned offloads off on every interface its links reach
    (its own, the switches', the switch-to-switch veths). Plain `mn --custom` has no hook after
    the net is built, but Mininet configures hosts after every link exists: so the topologies'
    hosts are these, and `iperf` in Mininet's CLI carries TCP through the userspace datapath."""

    def config(self, **params):
        result = super().config(**params)
        todo = [self]
        while todo:
            for intf in todo.pop().intfList():
                if intf.link is None or getattr(intf, "offloads_off", False):
                    continue  # loopback, or a link an earlier host's walk did
                for end in (intf.link.intf1, intf.link.intf2):
                    intf_offloads_off(end)
                    end.offloads_off = True
                todo.append(intf.link.intf2.node if intf.link.intf1 is intf else intf.link.intf1.node)
        return result

"""Which topology a scenario runs on, and where its emulated links (ckcd-link) go.

The dumbbell leaves s1-s2 out (`core_link=False`): ckcd-link joins s1 and s2 on the port after
their hosts' (port 3 with the default two hosts a side).
The two-path testbed gets both of s1's uplinks as ckcd-link, so that each path has the
same bottleneck (rate, delay, buffer) and Separate Paths has something to separate:

  h1,h2 - s1 =l0= s2 - s4 - h3,h4        l0: s1 port 3 - s2 port 1 (upper path)
               =l1= s3 -/                l1: s1 port 4 - s3 port 1 (lower path)
"""

from __future__ import annotations

from mininet.topo import Topo

from topologies.dumbbell import Dumbbell


class TwoPathsShaped(Topo):
    """topologies/two_paths.py's testbed without s1's two uplinks (ckcd-link provides them)."""

    def build(self):
        s1, s2, s3, s4 = (self.addSwitch(f"s{n}", dpid=f"{n:016x}", protocols="OpenFlow13")
                          for n in range(1, 5))
        for i in (1, 2):
            self.addLink(self.addHost(f"h{i}", ip=f"10.0.0.{i}/24"), s1)
        for j in (3, 4):
            self.addLink(self.addHost(f"h{j}", ip=f"10.0.0.{j}/24"), s4)
        self.addLink(s2, s4, port1=2, port2=3)
        self.addLink(s3, s4, port1=2, port2=4)


# name -> (Mininet topology, [(link name, bridge a, port a, bridge b, port b), ...]); the first
# link is the primary bottleneck (the one every flow crosses without an approach).
def topology(name: str, hosts_per_side: int = 2, extra_interfaces: dict[str, int] | None = None):
    """extra_interfaces: {sender: n}, n more interfaces on that host, each a link of its own to
    its switch s1 (on ports EXTRA_PORT_BASE and up): an MPTCP sender's further subflows leave
    through them (experiments/lab/mptcp.py)."""
    if name == "dumbbell":  # hosts h1..hN on s1, hN+1..h2N on s2; the bottleneck on port N+1 of each
        n = hosts_per_side
        topo, ends = Dumbbell(senders=n, receivers=n, core_link=False), [("l0", "s1", n + 1, "s2", n + 1)]
    elif name == "twopaths":
        topo, ends = TwoPathsShaped(), [("l0", "s1", 3, "s2", 1), ("l1", "s1", 4, "s3", 1)]
    else:
        raise ValueError(f"unknown topology {name!r}")
    port = EXTRA_PORT_BASE
    for host, n in sorted((extra_interfaces or {}).items()):
        for _ in range(n):
            topo.addLink(host, "s1", port2=port)
            port += 1
    return topo, ends


# Clear of the hosts' and the emulated links' ports on s1 (at most 8 hosts a side and two links).
EXTRA_PORT_BASE = 20

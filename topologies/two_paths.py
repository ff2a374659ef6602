"""Two edge-disjoint paths between the edge switches (seed 001, Fig. 1a).

  h1,h2 - s1 = s2 = s4 - h3,h4      (upper path s1-s2-s4)
                \\ s3 //            (lower path s1-s3-s4)

The senders (h1, h2) and the receivers (h3, h4) are joined by two paths
that share no link, so Separate Paths can give each aggregate its own.
Usage:
  mn --custom topologies/two_paths.py --topo twopaths \
     --switch ovs,datapath=user --controller remote
"""

import os
import sys

if "topologies" not in sys.modules:  # run by `mn --custom`: exec'd outside the package, no __file__
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename))))
from mininet.topo import Topo  # noqa: E402

from topologies import OffloadsOffHost  # noqa: E402


class TwoPaths(Topo):
    def build(self, senders: int = 2, receivers: int = 2):
        s1, s2, s3, s4 = (self.addSwitch(f"s{n}", dpid=f"{n:016x}", protocols="OpenFlow13")
                          for n in range(1, 5))
        for i in range(1, senders + 1):
            self.addLink(self.addHost(f"h{i}", ip=f"10.0.0.{i}/24", cls=OffloadsOffHost), s1)
        for j in range(senders + 1, senders + receivers + 1):
            self.addLink(self.addHost(f"h{j}", ip=f"10.0.0.{j}/24", cls=OffloadsOffHost), s4)
        self.addLink(s1, s2)
        self.addLink(s2, s4)
        self.addLink(s1, s3)
        self.addLink(s3, s4)


topos = {"twopaths": TwoPaths}

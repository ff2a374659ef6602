"""The CKCD dumbbell (seed 000, Fig. 4): h1,h2 - s1 - s2 - h3,h4.

s1-s2 is the bottleneck. Usage:
  mn --custom topologies/dumbbell.py --topo dumbbell \
     --switch ovs,datapath=user --controller remote
Traffic in the paper goes h1 -> h3 and h2 -> h4.

With core_link=False the s1-s2 link is left out so the lab can put the emulated
bottleneck (ckcd-link, ovs_config/bottleneck.py) on port 3 of both switches.
"""

import os
import sys

if "topologies" not in sys.modules:  # run by `mn --custom`: exec'd outside the package, no __file__
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename))))
from mininet.topo import Topo  # noqa: E402

from topologies import OffloadsOffHost  # noqa: E402


class Dumbbell(Topo):
    def build(self, senders: int = 2, receivers: int = 2, core_link: bool = True):
        left = self.addSwitch("s1", dpid="0000000000000001", protocols="OpenFlow13")
        right = self.addSwitch("s2", dpid="0000000000000002", protocols="OpenFlow13")
        for i in range(1, senders + 1):
            self.addLink(self.addHost(f"h{i}", ip=f"10.0.0.{i}/24", cls=OffloadsOffHost), left)
        for j in range(senders + 1, senders + receivers + 1):
            self.addLink(self.addHost(f"h{j}", ip=f"10.0.0.{j}/24", cls=OffloadsOffHost), right)
        if core_link:
            self.addLink(left, right, port1=senders + 1, port2=receivers + 1)  # the bottleneck


topos = {"dumbbell": Dumbbell}

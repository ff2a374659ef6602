"""The one place that imports the OpenFlow framework: Ryu 4.34, or OpenStack's os-ken.

Ryu is the framework this controller was written on; its last release (4.34, 2020) runs only up
to Python 3.11 (it imports distutils). os-ken is its maintained fork (Python 3.10-3.13) with the
same apps, events, OpenFlow parsers and eventlet hub, but no WSGI module (gone in 2.0) and no
manager (gone in 4.0): on os-ken our REST API is served by ryu_app/wsgi.py and the controller is
started by ryu_app/launch.py (docs/controller.md, "Frameworks").

Which one is decided by ryu_app/framework_choice.py, without importing either.
"""

from __future__ import annotations

import importlib.metadata
import os

from ryu_app.framework_choice import FrameworkError, choose

NAME = choose()

if NAME == "ryu":
    from ryu import cfg
    from ryu.app.wsgi import ControllerBase, WSGIApplication, route
    from ryu.base.app_manager import RyuApp as App
    from ryu.controller import ofp_event
    from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from ryu.lib import hub
    from ryu.lib.packet import arp, ethernet, ipv4, lldp, packet
    from ryu.ofproto import ether, ofproto_v1_3
else:
    # os-ken reads the hub type once, when its hub module is imported; its default ("native",
    # OS threads) has no timeout in Event.wait and no WSGI server. The eventlet hub keeps Ryu's
    # semantics, which this controller is written for.
    os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")
    from os_ken.lib import hub

    if hub.HUB_TYPE != "eventlet":
        raise FrameworkError(f"os-ken's hub is {hub.HUB_TYPE!r}: this controller needs OSKEN_HUB_TYPE=eventlet")
    from os_ken import cfg
    from os_ken.base.app_manager import OSKenApp as App
    from os_ken.controller import ofp_event
    from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from os_ken.lib.packet import arp, ethernet, ipv4, lldp, packet
    from os_ken.ofproto import ether, ofproto_v1_3

    from ryu_app.wsgi import ControllerBase, WSGIApplication, register_wsapi_options, route

    register_wsapi_options(cfg.CONF)

VERSION = importlib.metadata.version(NAME)

__all__ = ["NAME", "VERSION", "App", "cfg", "ofp_event", "set_ev_cls", "CONFIG_DISPATCHER", "DEAD_DISPATCHER",
           "MAIN_DISPATCHER", "hub", "packet", "ethernet", "arp", "ipv4", "lldp", "ether", "ofproto_v1_3",
           "WSGIApplication", "ControllerBase", "route"]

"""The lab: brings up OVS, Mininet, link daemons and the controller; runs and reports experiments."""

"""Entry module for `ryu-manager ckcd_coex`.

Ryu only loads RyuApp subclasses *defined* in the module it is given, so the
app is subclassed here rather than re-exported.
"""

from ryu_app.controller import CoexController


class CkcdCoexApp(CoexController):
    """The ckcd-coex controller (see ryu_app/controller.py)."""

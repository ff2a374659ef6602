"""Which OpenFlow framework this process uses, decided without importing one (ryu_app/framework.py
imports it; the launcher and the experiments' provenance only ask), once per process:

1. the one already imported (under `ryu-manager`, Ryu is; under the os-ken launcher, os-ken is:
   an app must subclass the running framework's base class, and two hubs in one process fail);
2. else CKCD_COEX_FRAMEWORK=ryu or os-ken;
3. else Ryu when it can be imported on this Python (it and distutils are there), else os-ken.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys

FRAMEWORKS = ("ryu", "os-ken")


class FrameworkError(ImportError):
    pass


def choose() -> str:
    """The framework this process uses (the module docstring says in what order)."""
    if "ryu.base.app_manager" in sys.modules:
        return "ryu"
    if "os_ken.base.app_manager" in sys.modules:
        return "os-ken"
    wanted = os.environ.get("CKCD_COEX_FRAMEWORK", "").strip().lower()
    if wanted and wanted not in FRAMEWORKS:
        raise FrameworkError(f"CKCD_COEX_FRAMEWORK={wanted!r}: use one of {', '.join(FRAMEWORKS)}")
    if wanted:
        return wanted
    if importlib.util.find_spec("ryu") and importlib.util.find_spec("distutils"):
        return "ryu"
    if importlib.util.find_spec("os_ken"):
        return "os-ken"
    raise FrameworkError("neither Ryu (with distutils, Python <= 3.11) nor os-ken can be imported: "
                         "install one (docs/controller.md, \"Frameworks\")")


def chosen_version() -> dict:
    """{"name", "version"} of the framework this process would use (None where none is)."""
    try:
        name = choose()
    except FrameworkError:
        return {"name": None, "version": None}
    try:
        return {"name": name, "version": importlib.metadata.version(name)}
    except importlib.metadata.PackageNotFoundError:
        return {"name": name, "version": None}

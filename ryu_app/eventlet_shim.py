"""Make Ryu 4.34's WSGI module importable with eventlet >= 0.33.

ryu/app/wsgi.py does `from eventlet.wsgi import ALREADY_HANDLED` at import
time, and ryu-manager imports that module before it loads any app, so the
name must exist before the first `import ryu.app.wsgi`. Newer eventlet dropped
the sentinel (it tracks "already handled" in eventlet.wsgi.WSGI_LOCAL). Ryu
only returns it from websocket handlers, which we do not use; an empty body is
what newer eventlet expects from an app that wrote its own response.

install() is run from a .pth file in the venv (written by scripts/setup.sh):
it arms an import hook and touches nothing until eventlet.wsgi is imported.
"""

import importlib.abc
import importlib.util
import sys
import warnings

_TARGET = "eventlet.wsgi"


def _patch(module) -> None:
    if not hasattr(module, "ALREADY_HANDLED"):
        module.ALREADY_HANDLED = []


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)  # let the real finders locate the module
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    # Eventlet >= 0.36 prints a deprecation banner on import; Ryu has no other
    # hub, so the banner only hides real messages in the controller log.
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())

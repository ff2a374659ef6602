"""Make Ryu 4.34's WSGI module importable with eventlet >= 0.33.

ryu/app/wsgi.py does `from eventlet.wsgi import ALREADY_HANDLED` at import
time, and ryu-manager imports that module before it loads any app, so the
name must exist before the first `import ryu.app.wsgi`. Newer eventlet dropped
the sentinel (it tracks "already handled" in eventlet.wsgi.WSGI_LOCAL). Ryu
only returns it from websocket handlers, which we do not use; an empty body is
what newer eventlet expects from an app that wrote its own response.

It also mends eventlet.patcher.inject(), which eventlet.wsgi runs (through
eventlet.green) for http.server, http.client and others: it imports a green
copy under the real name and puts the real module back into sys.modules, but
the import system has meanwhile bound the copy as the parent package's
attribute (`http.server`), and inject() leaves that (eventlet issue #316).
In a process that imports Ryu without monkey patching (our tests), code
that says `import http.server; http.server.ThreadingHTTPServer(...)` then
gets eventlet's green class: its shutdown() waits on a green lock that the
real server thread cannot wake, a deadlock. After each inject() the parents'
attributes are bound to what sys.modules holds again.

install() is run from a .pth file in the venv (written by scripts/setup.sh):
it arms an import hook and touches nothing until eventlet.wsgi or
eventlet.patcher is imported.
"""

import importlib.abc
import importlib.util
import sys
import types
import warnings

_WSGI, _PATCHER = "eventlet.wsgi", "eventlet.patcher"


def _patch_wsgi(module) -> None:
    if not hasattr(module, "ALREADY_HANDLED"):
        module.ALREADY_HANDLED = []


def rebind_package_attributes() -> None:
    """Make every package's attribute for a loaded submodule the module sys.modules holds."""
    for name, module in list(sys.modules.items()):
        parent, _, child = name.rpartition(".")
        package = sys.modules.get(parent) if parent else None
        bound = vars(package).get(child) if isinstance(package, types.ModuleType) else None  # no __getattr__ hooks
        if module is not None and isinstance(bound, types.ModuleType) and bound is not module:
            setattr(package, child, module)


def _patch_patcher(module) -> None:
    inject = module.inject
    if getattr(inject, "_ckcd_rebinds", False):
        return

    def inject_then_rebind(*args, **kwargs):
        try:
            return inject(*args, **kwargs)
        finally:
            rebind_package_attributes()

    inject_then_rebind._ckcd_rebinds = True
    module.inject = inject_then_rebind


_PATCHES = {_WSGI: _patch_wsgi, _PATCHER: _patch_patcher}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _PATCHES:
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
            _PATCHES[fullname](module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    # Eventlet >= 0.36 prints a deprecation banner on import; Ryu has no other
    # hub, so the banner only hides real messages in the controller log.
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not all(name in sys.modules for name in _PATCHES) and \
            not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())

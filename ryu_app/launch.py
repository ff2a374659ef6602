"""`ckcd-coex-controller [OPTIONS] [APP...]`: start the controller on either framework.

Under Ryu this is `ryu-manager` itself (its main, with `ckcd_coex` as the app when none is
given): `ryu-manager ckcd_coex` and this command are the same. os-ken has no manager since 4.0,
so under os-ken this module does what a manager does, in this order:

1. the eventlet hub (OSKEN_HUB_TYPE=eventlet, ryu_app/framework.py) and its monkey patching,
   before anything creates a socket, a lock or a thread;
2. every command-line option registered (os-ken's logging and OpenFlow options, our
   --wsapi-host/--wsapi-port, and the manager's own: the apps, --app-lists, --pid-file), then the
   arguments parsed, with no configuration file unless --config-file names one;
3. the apps loaded, their contexts made and the apps started (the OpenFlow listener is os-ken's
   ofp_handler, which the apps' event handlers pull in);
4. every WSGI application context served on --wsapi-host:--wsapi-port (ryu_app/wsgi.py), with
   the options as the apps left them (ours moves the host to loopback);
5. wait for the apps; Ctrl-C or SIGTERM closes them.

The options are ryu-manager's: --ofp-tcp-listen-port, --wsapi-host, --wsapi-port, --verbose,
--log-file, --config-file, ... (`ckcd-coex-controller --help`).
"""

from __future__ import annotations

import os
import signal
import sys

DEFAULT_APP = "ckcd_coex"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(not a.startswith("-") for a in argv):
        argv.append(DEFAULT_APP)
    from ryu_app.framework_choice import choose

    if choose() == "ryu":
        from ryu.cmd import manager

        sys.argv = ["ryu-manager"] + argv
        manager.main()
        return 0
    return _run_os_ken(argv)


def _run_os_ken(argv: list[str]) -> int:
    os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")
    green_everything()
    from os_ken.lib import hub
    import logging

    from os_ken import cfg, log

    log.early_init_log(logging.DEBUG)
    # app_manager before controller: controller imports app_manager, which imports
    # controller's Datapath, a cycle that resolves only in this order.
    from os_ken.base.app_manager import AppManager
    import os_ken.controller.controller  # noqa: F401 (registers the OpenFlow options)
    import os_ken.flags  # noqa: F401 (registers os-ken's command-line flags)

    from ryu_app import framework  # registers --wsapi-host/--wsapi-port

    cfg.CONF.register_cli_opts([
        cfg.ListOpt("app-lists", default=[], help="application module names to run"),
        cfg.MultiStrOpt("app", positional=True, default=[], help="application module name to run"),
        cfg.StrOpt("pid-file", default=None, help="pid file name"),
    ])
    cfg.CONF(args=argv, prog="ckcd-coex-controller", project="ckcd_coex", default_config_files=[])
    log.init_log()
    if cfg.CONF.pid_file:
        with open(cfg.CONF.pid_file, "w") as f:
            f.write(str(os.getpid()))
    manager = AppManager.get_instance()
    manager.load_apps(cfg.CONF.app_lists + cfg.CONF.app)
    contexts = manager.create_contexts()
    services = manager.instantiate_apps(**contexts)
    for context in contexts.values():
        if isinstance(context, framework.WSGIApplication):
            server = hub.WSGIServer((cfg.CONF.wsapi_host, cfg.CONF.wsapi_port), context)
            services.append(hub.spawn(server.serve_forever))
    _stop_main_on(signal.SIGTERM, signal.SIGINT)
    try:
        hub.joinall(services)
    except KeyboardInterrupt:
        pass
    finally:
        manager.close()
    return 0


def green_everything() -> None:
    """Every module green (socket, select, time, thread, os, subprocess), as under ryu-manager.
    Not os-ken's hub.patch(thread=True): eventlet patches only the modules named True when any
    is, so that call alone leaves sockets blocking, and one recvfrom stalls every green thread."""
    import eventlet

    eventlet.monkey_patch()


def _stop_main_on(*signals) -> None:
    """SIGTERM and Ctrl-C close the apps. A Python signal handler runs in whichever green
    thread is current: raising there would end only that thread (os-ken's hub logs it and
    goes on), so the handler asks the hub to throw KeyboardInterrupt into the main green
    thread, which waits in joinall."""
    import greenlet
    from eventlet import hubs

    main = greenlet.getcurrent()

    def handler(_signum, _frame):
        hubs.get_hub().schedule_call_global(0, main.throw, KeyboardInterrupt)

    for sig in signals:
        signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())

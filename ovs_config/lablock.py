"""One lab at a time on a machine.

Mininet, OVS and the link daemon share two cores; two labs running at once
make each other's measurements meaningless (and fight over interface names).
Everything that starts a lab - the private OVS, a namespace test, an
experiment - holds this lock for as long as the lab exists.

The lock is re-entrant within a process: flock is per open file, so a second
lab_lock() in the process that already holds it (a test inside a session that
holds it) would otherwise wait on itself.
"""

import contextlib
import fcntl
import os
import threading
import time

LAB_LOCK_PATH = os.environ.get("CKCD_LAB_LOCK", "/tmp/ckcd-coex-lab.lock")

_held: dict[str, int] = {}  # path -> nesting depth in this process
_guard = threading.Lock()


@contextlib.contextmanager
def lab_lock(timeout_s: float = 1800.0, path: str = LAB_LOCK_PATH):
    """Hold the machine-wide lab lock; wait up to timeout_s for it."""
    with _guard:
        if _held.get(path):
            _held[path] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _guard:
                _held[path] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another lab holds {path} for more than {timeout_s:.0f} s; "
                        "wait for it or stop it (mn -c, make clean-lab)")
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        with _guard:
            _held[path] = 1
        try:
            yield
        finally:
            with _guard:
                _held.pop(path, None)
    finally:
        os.close(fd)  # closing releases the flock

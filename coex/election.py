"""Who leads, among instances that share one policy store on one host: the one holding an
exclusive lock (flock) on a file beside the store.

The kernel ties the lock to the open file: it is released when the holder closes it or
dies, kill -9 included, and then another instance's next try takes it. No lease to expire,
no clock to trust. What it cannot see is a holder that is alive but stuck (stopped, or in an
endless loop): that one keeps the lock, as it keeps its OpenFlow connections (docs/ha.md).
"""

from __future__ import annotations

import fcntl
import os


class LeaderLock:
    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_take(self) -> bool:
        """Take the lock if nobody holds it; never waits. True while we hold it."""
        if self._fd is not None:
            return True
        # O_NOFOLLOW: a link planted at the lock's name must not choose which file we open
        # (the controller runs as root). Not inherited by the commands we run (O_CLOEXEC):
        # a child outliving us would hold the lock in our place.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of it releases the lock
            self._fd = None

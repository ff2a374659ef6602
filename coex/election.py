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
import stat


class LeaderError(OSError):
    """The lock's file cannot be trusted or opened."""


class LeaderLock:
    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """We hold the lock on the file that is at its name now: one renamed or removed since
        (another instance would lock a new file there) is not held any more."""
        if self._fd is None:
            return False
        try:
            now, ours = os.stat(self.path, follow_symlinks=False), os.fstat(self._fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino)

    def try_take(self) -> bool:
        """Take the lock if nobody holds it; never waits. True while we hold it. LeaderError if
        the file at the lock's name is not one we can trust (a link, not a regular file, another
        user's, or writable by others: whoever made it could hold it, or swap it, to keep us out)."""
        if self.held:
            return True
        self.release()
        # O_NOFOLLOW: a link planted at the lock's name must not choose which file we open
        # (the controller runs as root). Not inherited by the commands we run (O_CLOEXEC):
        # a child outliving us would hold the lock in our place.
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise LeaderError(f"leader lock {self.path}: {err.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise LeaderError(f"leader lock {self.path} is not a regular file of ours that only we may "
                                  "write: remove it, and keep its directory writable by us alone")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self.held

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of it releases the lock
            self._fd = None

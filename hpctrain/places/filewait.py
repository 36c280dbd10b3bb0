"""Waiting for a log file to grow: inotify where the file system reports writes, a short poll
where it cannot (NFS, Lustre, GPFS: a compute node's writes are not seen by the login's kernel).

`logs -f` prints a line about as soon as it is written, like `tail -F`, without a busy loop.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import ctypes

# Network file systems by statfs(2)'s f_type: another machine's writes raise no inotify event.
NETWORK_FS = {
    0x6969: "nfs", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x0BD00BD0: "lustre",
    0x47504653: "gpfs", 0x19830326: "beegfs", 0x00C36400: "ceph", 0x65735546: "fuse",
    0x013111A8: "ibrix", 0x6B414653: "afs", 0x5346414F: "openafs",
}
# The poll's interval where there is no inotify: a line shows within about this long.
SHORT_POLL_S = 0.02
_IN_MODIFY, _IN_CLOSE_WRITE, _IN_CREATE, _IN_MOVED_TO = 0x2, 0x8, 0x100, 0x80
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
# struct inotify_event: wd, mask, cookie, len, then len bytes of NUL-padded name.
_EVENT = struct.Struct("iIII")


class Waiter(Protocol):
    """Blocks until the watched file may have changed, or `timeout_s` has passed; True when
    the kernel said a file changed (inotify), False after a timeout or a poll's sleep."""

    kind: str

    def wait(self, timeout_s: float) -> bool: ...

    def writer_closed(self) -> bool:
        """True while the last thing seen of the file was its last writer closing it."""
        ...

    def close(self) -> None: ...


class PollWaiter:
    """Sleeps a short while: the next read finds what was written meanwhile."""

    def __init__(self, interval_s: float = SHORT_POLL_S, kind: str = "poll") -> None:
        self.interval_s = interval_s
        self.kind = kind

    def wait(self, timeout_s: float) -> bool:
        time.sleep(max(0.0, min(timeout_s, self.interval_s)))
        return False

    def writer_closed(self) -> bool:
        # A poll sees sizes only: who holds the file open is unknown (another node, over NFS).
        return False

    def close(self) -> None:
        pass


class InotifyWaiter:
    """Woken by the kernel when a file in the log's directory is written, created or moved in
    (the directory is watched: the log may not exist yet, or be replaced by a requeue).

    It also notes when the log's last writer closes it (IN_CLOSE_WRITE comes when the last
    descriptor open for writing goes): SLURM's batch step holds the job's stdout open until
    the batch script and everything it started have ended, so the close says the job is over
    about as soon as it is, where SLURM's answer would come at the watcher's next poll.
    """

    kind = "inotify"

    def __init__(self, fd: int, name: str = "") -> None:
        self.fd = fd
        self.name = os.fsencode(name)
        self._closed = False

    def wait(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if ready:
            # Read every pending event: one wake-up per batch of writes.
            with contextlib.suppress(BlockingIOError, InterruptedError):
                while data := os.read(self.fd, 65536):
                    self._note(data)
        return bool(ready)

    def _note(self, data: bytes) -> None:
        """Follow the log's own events in order: a write after a close reopens it."""
        at = 0
        while at + _EVENT.size <= len(data):
            _wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
            name = data[at + _EVENT.size:at + _EVENT.size + size].rstrip(b"\0")
            at += _EVENT.size + size
            if name != self.name:
                continue
            if mask & _IN_CLOSE_WRITE:
                self._closed = True
            elif mask & (_IN_MODIFY | _IN_CREATE | _IN_MOVED_TO):
                self._closed = False

    def writer_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    # Imported here: status reaches this module through the places, and waits for no file.
    import ctypes
    import ctypes.util

    # glibc's name first: find_library runs ldconfig (a process) to learn another libc's.
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libc.so.6", use_errno=True)
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None


def fs_type(path: Path) -> int | None:
    """statfs(2)'s f_type of the file system holding `path` (Linux); None where unknown."""
    libc = _libc()
    if libc is None or not hasattr(libc, "statfs"):
        return None
    import ctypes

    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type (a long) comes first
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def _inotify(directory: Path, name: str) -> InotifyWaiter | None:
    libc = _libc()
    if libc is None or not hasattr(libc, "inotify_init1"):
        return None
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None
    mask = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_CREATE | _IN_MOVED_TO
    if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
        os.close(fd)
        return None
    return InotifyWaiter(fd, name)


def waiter_for(path: Path) -> Waiter:
    """The best way to wait for `path` to grow: inotify on its directory where the file system
    reports the writes, else a short poll (named by the file system's kind)."""
    directory = path.parent
    if not directory.is_dir():
        return PollWaiter(kind="poll (no directory yet)")
    kind = fs_type(directory)
    if kind in NETWORK_FS:
        return PollWaiter(kind=f"poll ({NETWORK_FS[kind]})")
    return _inotify(directory, path.name) or PollWaiter(kind="poll (no inotify)")

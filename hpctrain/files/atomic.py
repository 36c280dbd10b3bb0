"""Files: writing one so that a failure leaves what was there before, whole; reading a
large one's end without reading it all."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def write_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `text` (or bytes) in one step: a temporary file, then a rename."""
    # A full disk, a missing directory or text that is not valid UTF-8 raises (OSError,
    # UnicodeError) and leaves no temporary file; the old file, if any, stays as it was.
    # tempfile is imported here: it costs ~5 ms, and most commands never write a file.
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:16]}.", suffix=".tmp")
    replaced = False
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as out:
                out.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        replaced = True
    finally:
        if not replaced:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def read_own_file(path: Path | str, max_bytes: int) -> bytes | None:
    """A cache file's bytes; None where it is missing, not a regular file, larger than
    `max_bytes`, or could have been written by another user (not ours, or group- or
    world-writable): what such a file says is not trusted, even when it parses."""
    try:
        # O_NONBLOCK: a FIFO in the cache's place must not hang hpctrain; fstat refuses it.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        if hasattr(os, "geteuid") and (st.st_uid != os.geteuid() or st.st_mode & 0o022):
            return None
        return os.read(fd, max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


_CHUNK = 1 << 16


def tail_bytes(path: Path, lines: int) -> tuple[bytes, int]:
    """The last `lines` lines of a file and the file's size (where following starts); reads
    backwards in blocks, so a 100 MB log costs what its end costs."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if lines <= 0:
            return b"", size
        pos, blocks, newlines = size, [], 0
        # One newline more than asked: the last may end the file.
        while pos > 0 and newlines <= lines:
            step = min(_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            block = fh.read(step)
            blocks.append(block)
            newlines += block.count(b"\n")
        data = b"".join(reversed(blocks))
        kept = data.splitlines(keepends=True)[-lines:]
        return b"".join(kept), size

"""Files: writing one so that a failure leaves what was there before, whole; reading a
large one's end without reading it all."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Replace `path` with `text` in one step: a temporary file, then a rename."""
    # A full disk, a missing directory or text that is not valid UTF-8 raises (OSError,
    # UnicodeError) and leaves no temporary file; the old file, if any, stays as it was.
    # tempfile is imported here: it costs ~5 ms, and most commands never write a file.
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:16]}.", suffix=".tmp")
    replaced = False
    try:
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

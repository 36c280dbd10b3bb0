"""Writing a file so that a failure leaves what was there before, whole."""

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

"""Atomic files: checkpoints, metrics.json and markers go to a temporary sibling, then renamed."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files readable by the owner only; results should follow the umask as
# open() would, so that a group can read a shared run directory.
_FILE_MODE = 0o666 & ~_umask()


def atomic_write_bytes(path: Path, write: Callable[[Any], None]) -> None:
    """Write a file through `write(fileobj)` to a temporary sibling, fsync, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
        _fsync_directory(path.parent)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


# What atomic_write_bytes names its temporary sibling: mkstemp's 8 random characters.
_TORN = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")


def clear_torn_writes(directory: Path, names: frozenset[str]) -> list[Path]:
    """Remove the temporary siblings that a process killed while writing one of `names` left:
    a checkpoint's is as large as the checkpoint. Only at a segment's start, when nothing of
    the run writes."""
    removed = []
    for p in directory.glob(".*.tmp"):
        found = _TORN.match(p.name)
        if found and found["name"] in names and p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once its directory is: a stop reports the checkpoint as on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network filesystems refuse fsync on a directory
    finally:
        os.close(fd)


def atomic_copy(source: Path, target: Path) -> None:
    """Copy a file atomically (temporary sibling + rename)."""

    def copy(out: Any) -> None:
        with source.open("rb") as f:
            shutil.copyfileobj(f, out)

    atomic_write_bytes(target, copy)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temporary sibling + rename)."""
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save to a temporary file beside the target, then os.replace: no torn checkpoints."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        atomic_write_bytes(Path(path), lambda f: torch.save(checkpoint, f))

"""SLURM's version as `sinfo --version` said it, kept per sinfo binary.

The version decides the form of every query (JSON or text), and asking costs a process per
command (`status` asked three times where two were enough: issue 43). It changes only when
SLURM is upgraded, that is when the sinfo binary is replaced: the key is the binary's resolved
path with its inode, size and modification time, so an upgrade is asked again. A file that
cannot be read or written costs nothing but the question.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping

from hpctrain.files import paths

FILE = "slurm-version.json"
_KEPT = 16  # binaries remembered (a few SLURMs side by side at most)


def binary_key(env: Mapping[str, str]) -> str | None:
    """`/usr/bin/sinfo:<inode>:<size>:<mtime ns>` for the sinfo `env`'s PATH finds; None
    where there is none."""
    found = shutil.which("sinfo", path=env.get("PATH"))
    if found is None:
        return None
    real = os.path.realpath(found)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _read() -> dict[str, str]:
    try:
        data = json.loads((paths.state_dir() / FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def known(key: str) -> str | None:
    """What `sinfo --version` said for this binary, if it was asked before."""
    return _read().get(key)


def remember(key: str, text: str) -> None:
    """Keep `text` for this binary (written whole: a reader never sees half a file)."""
    kept = {k: v for k, v in _read().items() if k != key}
    kept = dict(list(kept.items())[-(_KEPT - 1):])
    kept[key] = text.strip()
    target = paths.state_dir() / FILE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(kept, indent=1) + "\n")
        os.replace(partial, target)
    except OSError:
        return

"""The one marked /etc/hosts line that makes the emulated node names resolve."""

from __future__ import annotations

import fcntl
from collections.abc import Iterable, Sequence
from pathlib import Path

from hpctrain.errors import DevClusterError

HOSTS_FILE = Path("/etc/hosts")
HOSTS_MARKER = "# hpctrain-devcluster"


def marker(tag: str = "") -> str:
    """Our mark; a cluster on moved ports (a second one on this machine) has a line of its own,
    so that one emulating Raven does not take `node1` from one emulating `local`."""
    return f"{HOSTS_MARKER} {tag}" if tag else HOSTS_MARKER


def hosts_line(names: Iterable[str], tag: str = "") -> str:
    """The line naming the nodes, marked as ours."""
    return f"127.0.0.1 {' '.join(names)} {marker(tag)}"


def update_hosts(text: str, names: Sequence[str], tag: str = "") -> str:
    """/etc/hosts with exactly one line of ours naming these nodes (others' lines untouched)."""
    kept = [line for line in text.splitlines() if not line.rstrip().endswith(marker(tag))]
    if names:
        kept.append(hosts_line(names, tag))
    return "\n".join(kept) + "\n"


def hosts_has_line(text: str, names: Sequence[str], tag: str = "") -> bool:
    """The text already holds our line for exactly these nodes."""
    return any(line.strip() == hosts_line(names, tag) for line in text.splitlines())


def ensure_hosts(names: Sequence[str], hosts_file: Path = HOSTS_FILE, tag: str = "") -> None:
    """Make the node names resolve (MASTER_ADDR is the first node of a multi-node job)."""
    try:
        text = hosts_file.read_text()
    except OSError:
        text = ""
    if hosts_has_line(text, names, tag):
        return
    try:
        # Rewrite in place: /etc/hosts is often a bind mount that cannot be replaced.
        with open(hosts_file, "r+") as fh:
            # Two dev clusters may start at once (scripts/test.sh): one rewrite at a time.
            fcntl.flock(fh, fcntl.LOCK_EX)
            current = fh.read()
            fh.seek(0)
            fh.write(update_hosts(current, names, tag))
            fh.truncate()
    except OSError as e:
        raise DevClusterError(
            f"cannot add the dev cluster's node names to {hosts_file} ({e.strerror})",
            f"add this line to {hosts_file} as root: {hosts_line(names, tag)}",
        ) from None

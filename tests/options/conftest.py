"""Fixtures for the option tests: the real sshd and laptop of tests/remote, and the dev cluster
emulating a two-partition profile (tests/options/two-partitions.yaml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# The same fixtures as tests/remote, not copies: a real OpenSSH server on loopback.
from tests.remote.conftest import laptop, sshd

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

__all__ = ["TWO_PARTITIONS", "laptop", "running", "sshd", "two_partitions"]

TWO_PARTITIONS = Path(__file__).resolve().parent / "two-partitions.yaml"


@pytest.fixture
def two_partitions(devcluster_with: Callable[..., DevClusterHandle]) -> DevClusterHandle:
    """The dev cluster emulating two-partitions.yaml, one node per partition.

    Through the session's switch: a no-op when it runs already, and the session brings `local`
    (2 nodes) back for the next test that asks for `devcluster`, and at its end."""
    return devcluster_with(str(TWO_PARTITIONS), nodes=1)


def running(pid: int) -> bool:
    """The process exists and is no zombie (its parent, maybe this very test session, or a
    container's init, may not have reaped it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"

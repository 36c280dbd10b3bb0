"""Where slurmctld listens (from slurm.conf), and whether anything accepts a connection there.

No SLURM command runs here: a TCP connect is refused in a millisecond, where squeue and
scontrol retry a refused connection once a second for MessageTimeout seconds (10 by default).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpctrain.slurm import parsers

CONNECT_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Controller:
    """One slurmctld as slurm.conf names it (SlurmctldHost, SlurmctldPort)."""

    name: str
    address: str
    port: int

    def __str__(self) -> str:
        where = f"{self.address}:{self.port}"
        return f"slurmctld at {where}" if self.name == self.address else (
            f"slurmctld on {self.name} ({where})")


def controllers(conf_path: str | None) -> list[Controller]:
    """The controllers a slurm.conf names, primary first; none if it is unreadable."""
    if conf_path is None:
        return []
    try:
        text = Path(conf_path).read_text(errors="replace")
    except OSError:
        return []
    return [Controller(*c) for c in parsers.parse_controllers(text)]


def connect_error(controller: Controller, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why a TCP connection to the controller fails, or None when one is accepted."""
    try:
        with socket.create_connection((controller.address, controller.port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return "refuses connections (slurmctld is not running)"
    except socket.gaierror:
        return f"cannot be found: the name {controller.address} does not resolve"
    except TimeoutError:
        return f"accepts no connection within {timeout_s:g} s"
    except OSError as e:
        return f"cannot be reached: {e.strerror or e}"


def unreachable(found: Sequence[Controller], timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why no controller can be reached, or None when one accepts a connection (or none is known).

    A stopped (SIGSTOP) or busy slurmctld still accepts connections (the kernel queues them):
    that is not "unreachable", and the command's own timeout decides.
    """
    reasons: list[str] = []
    for controller in found:
        why = connect_error(controller, timeout_s)
        if why is None:
            return None
        reasons.append(f"{controller} {why}")
    return "; ".join(reasons) or None

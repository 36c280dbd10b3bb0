"""A rendezvous port for each attempt: free on the job's first node when the supervisor is there.

The same rule as the batch script's first port (templates/sbatch.sh.j2): 20000 to 31999, below
Linux's ephemeral ports, so an outgoing connection never holds it; the next attempt starts one
above the port before, so a port a killed rank's store left in TIME_WAIT is not waited for.
"""

from __future__ import annotations

import socket

FIRST, SPAN = 20000, 12000


def wrapped(port: int) -> int:
    """The port brought back inside 20000-31999."""
    return FIRST + (port - FIRST) % SPAN


def bindable(port: int) -> bool:
    """True when a listening socket could take `port` on this machine now."""
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def next_port(previous: int, here: bool) -> int:
    """The port after `previous`: the first bindable one where this is the first node (`here`),
    else simply the next (another node cannot be asked)."""
    for n in range(1, SPAN + 1):
        port = wrapped(previous + n)
        if not here or bindable(port):
            return port
    return wrapped(previous + 1)

"""Start the dev cluster's daemons that do not run, each waited for until it answers.

munged, MariaDB (its database made on the first start) and slurmdbd first, then slurmctld
and one slurmd a node; the ports of those still to start are checked before any starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from hpctrain.devcluster.daemons import Daemons, database_exists, init_database, munge_works
from hpctrain.devcluster.processes import (
    Daemon,
    port_open,
    port_owner,
    running_pid,
    start,
    wait_started,
)
from hpctrain.devcluster.topology import ClusterPlan
from hpctrain.errors import DevClusterError

# Generous; on the 2-core dev machine each daemon starts in a second or two.
START_TIMEOUT_S = 30.0


def check_ports(daemons: Daemons, plan: ClusterPlan) -> None:
    """Before starting anything: the ports of the daemons still to start must be free."""
    d, ports = daemons, daemons.ports
    needed = [(ports.mysqld, d.mysqld()), (ports.slurmdbd, d.slurmdbd()),
              (ports.slurmctld, d.slurmctld()),
              *((p, d.slurmd(n)) for n, p in plan.node_ports().items())]
    for port, daemon in needed:
        if running_pid(daemon) is None and port_open(port):
            raise DevClusterError(
                f"port {port} for {daemon.name} is taken by {port_owner(port)}",
                "stop that process; if it is a dev cluster under another HPCTRAIN_HOME, "
                "run `HPCTRAIN_HOME=<that dir> hpctrain devcluster down`",
            )


def start_base(daemons: Daemons, say: Callable[[str], None]) -> None:
    """munged, MariaDB and slurmdbd, those not running."""
    L, ports = daemons.layout, daemons.ports
    munged, mysqld, slurmdbd = daemons.base()
    if running_pid(munged) is None:
        say("starting munged")
        with contextlib.suppress(FileNotFoundError):
            L.munge_socket.unlink()
        _start_and_wait(munged, lambda: munge_works(L.munge_socket))
    if running_pid(mysqld) is None:
        if not database_exists(L):
            say("initialising the accounting database (first start only)")
            init_database(L)
        say("starting mysqld")
        _start_and_wait(mysqld, lambda: port_open(ports.mysqld))
    if running_pid(slurmdbd) is None:
        say("starting slurmdbd")
        _start_and_wait(slurmdbd, lambda: port_open(ports.slurmdbd))


def start_slurm(daemons: Daemons, plan: ClusterPlan, say: Callable[[str], None]) -> None:
    """slurmctld and the plan's slurmds, those not running."""
    ctld = daemons.slurmctld()
    if running_pid(ctld) is None:
        # Never with -c: slurmctld recovers its jobs from StateSaveLocation.
        say("starting slurmctld")
        _start_and_wait(ctld, lambda: port_open(daemons.ports.slurmctld))
    dead = {n: p for n, p in plan.node_ports().items()
            if running_pid(daemons.slurmd(n)) is None}
    if not dead:
        return
    say(f"starting {len(dead)} slurmd ({', '.join(dead)})")
    slurmds = [daemons.slurmd(n) for n in dead]
    for d in slurmds:
        start(d)
    for d, port in zip(slurmds, dead.values(), strict=True):
        wait_started(d, START_TIMEOUT_S, lambda p=port: port_open(p))  # type: ignore[misc]


def _start_and_wait(daemon: Daemon, ready: Callable[[], bool]) -> None:
    start(daemon)
    wait_started(daemon, START_TIMEOUT_S, ready)

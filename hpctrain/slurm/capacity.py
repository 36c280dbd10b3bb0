"""What the cluster offers and what you have used: GPUs free and waiting, reservations ahead,
your accounts' usage; each family's commands in one round trip over a login.

Reached through `SlurmClient` (slurm/client.py), which imports this module only when asked:
`status` needs none of it. The pure readers are availability.py, reservations.py, usage.py.
"""

from __future__ import annotations

import time

from hpctrain.errors import SlurmError
from hpctrain.slurm import availability, reservations, usage
from hpctrain.slurm.runner import Result, SlurmRunner


def ask_availability(client: SlurmRunner, now: float | None = None
                     ) -> availability.Availability:
    """Each partition's GPUs busy and free, its waiting jobs and the maintenance windows
    ahead: sinfo, squeue and scontrol in one round trip."""
    argvs = (availability.SINFO_ARGV, availability.SQUEUE_ARGV, reservations.SHOW_ARGV)
    nodes, queue, reserved = client.run_together(argvs)
    for got in (nodes, queue, reserved):
        if got.returncode != 0:
            raise SlurmError(f"{got.argv[0]} failed: {(got.stderr or got.stdout).strip()}",
                             "check that SLURM answers (`sinfo`)")
    found = availability.parse_nodes(nodes.stdout)
    return availability.Availability(
        availability.by_partition(found, availability.parse_waiting(queue.stdout)),
        availability.windows(found, reservations.parse(reserved.stdout),
                             time.time() if now is None else now))


def ask_usage(client: SlurmRunner, days: float, now: float | None = None) -> usage.Usage:
    """Your accounts' GPU-hours over the last `days`, their fair share and what your jobs
    hold: sacct, sshare, sprio and squeue in one round trip."""
    now = time.time() if now is None else now
    since = now - days * 86400
    acct, share, prio, mine = client.run_together(
        (usage.sacct_argv(since), usage.SSHARE_ARGV, usage.SPRIO_ARGV, availability.MINE_ARGV))
    return usage.usage(since, now, _answer(acct), _answer(share),
                       (prio.returncode, prio.stdout + prio.stderr), _answer(mine),
                       None if acct.returncode == 0 else f"sacct: {acct.said()}")


def ask_reservations(client: SlurmRunner) -> list[reservations.Reservation]:
    """The cluster's reservations (`scontrol show reservation`)."""
    return reservations.parse(client.run(list(reservations.SHOW_ARGV)).stdout)


def _answer(result: Result) -> str | None:
    """What a command printed, or None where it failed."""
    return result.stdout if result.returncode == 0 else None

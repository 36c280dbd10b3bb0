"""The threads of a run on this machine outside SLURM: the CPUs idle now, as a job gets its own.

torch starts a thread per core it sees. A job's script gives each rank the CPUs it holds
(templates/sbatch.sh.j2); a local run holds no CPUs, and on a machine where other work runs its
threads spin against that work: `hpctrain train --task spiral` took 62 s with torch's 2 threads
while jobs ran on this 2-core machine, 4.0 s with 1 (docs/trainer.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

# The variables the job script sets from OMP_NUM_THREADS; a user's own value is kept.
FOLLOWERS = ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Set by a launcher (srun, torchrun, a job's script): the threads are theirs to choose.
LAUNCHED = ("SLURM_JOB_ID", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")


@dataclass(frozen=True)
class Threads:
    """The threads chosen for a local run, and what they were chosen from."""

    threads: int
    cpus: int
    load: float

    def note(self) -> str:
        """One line for stderr: the choice and how to override it."""
        return (f"threads: {self.threads} (OMP_NUM_THREADS unset: {self.cpus} CPU(s), "
                f"{self.load:.1f} busy on average; export OMP_NUM_THREADS=N to choose)")


def idle_cpus(cpus: int, load: float) -> int:
    """The CPUs left to a new run: those this process may use less the load, at least one."""
    return max(1, min(cpus, math.floor(cpus - load)))


def choose(environ: Mapping[str, str], cpus: int, load: float) -> Threads | None:
    """The threads for a run outside a launcher where OMP_NUM_THREADS is unset; else None."""
    if environ.get("OMP_NUM_THREADS") or any(environ.get(v) for v in LAUNCHED):
        return None
    return Threads(idle_cpus(cpus, load), cpus, load)


def set_for_local_run(environ: dict[str, str] | None = None) -> Threads | None:
    """Choose the threads (before torch is imported) and export them as the job script does."""
    env = os.environ if environ is None else environ
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average here: assume the machine is idle
        load = 0.0
    chosen = choose(env, len(os.sched_getaffinity(0)), load)
    if chosen is not None:
        env["OMP_NUM_THREADS"] = str(chosen.threads)
        for name in FOLLOWERS:
            env.setdefault(name, str(chosen.threads))
    return chosen

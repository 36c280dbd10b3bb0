"""The one door to SLURM: every command hpctrain sends goes through `SlurmClient`.

Its families live beside it, each a module of calls on slurm/runner.py's `SlurmRunner` (which
runs a command through the transport, with a timeout): jobs.py (the queue query, scontrol,
accounting), capacity.py (availability, usage, reservations), survey.py (the inventory and
sacctmgr), testonly.py (`sbatch --test-only`). Those a `status` never needs are imported by the
methods that use them: each costs start-up time on a login node.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import SlurmError, SlurmUnavailableError
from hpctrain.slurm import jobs, parsers
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.query import QueueQuery, QueueResult
from hpctrain.slurm.runner import (
    DEFAULT_TIMEOUT_S,
    SlurmRunner,
    SlurmTimeoutError,
    resolve_slurm_conf,
)
from hpctrain.slurm.transport import LocalTransport, Transport
from hpctrain.startup import ahead

if TYPE_CHECKING:
    from hpctrain.slurm import availability, inventory, usage
    from hpctrain.slurm.accounting import Accounting
    from hpctrain.slurm.reservations import Reservation
    from hpctrain.slurm.testonly import TestOnlyVerdict
    from hpctrain.slurm.versions import Dialect


class SlurmClient(SlurmRunner):
    """Runs sbatch/squeue/sacct/scancel/scontrol/sinfo/sacctmgr with one environment."""

    @classmethod
    def from_environment(cls, timeout_s: float | None = None) -> SlurmClient:
        """The client for the SLURM here: SLURM_CONF, else the dev cluster's, else the system's."""
        return cls.local(resolve_slurm_conf(), timeout_s)

    @classmethod
    def local(cls, slurm_conf: str | None, timeout_s: float | None = None) -> SlurmClient:
        """The client for the SLURM here, reading `slurm_conf` (None: the system's)."""
        return cls(LocalTransport(slurm_conf),
                   timeout_s=timeout_s if timeout_s is not None else _env_timeout())

    @classmethod
    def over(cls, transport: Transport) -> SlurmClient:
        """The client whose commands run through `transport`, with this machine's timeout."""
        return cls(transport, timeout_s=_env_timeout())

    def cluster_name(self) -> str | None:
        """The cluster the commands talk to, as learnt without a SLURM call; None: unknown."""
        return self.transport.cluster_name()

    # --- jobs: submit, release, cancel --------------------------------------------------------

    def submit(self, script: str | Path, *, cwd: str | Path | None = None,
               options: Sequence[str] = ()) -> str:
        """`sbatch --parsable [OPTIONS] SCRIPT`; the job id, or SlurmError with SLURM's words."""
        try:
            result = self.run(["sbatch", "--parsable", *options, str(script)], cwd=cwd,
                              check=False)
        except SlurmTimeoutError as e:
            raise SlurmTimeoutError(
                f"{e.what}; the job may have been queued all the same",
                "look for it with `squeue --me` before submitting again; "
                "HPCTRAIN_SLURM_TIMEOUT raises the limit",
            ) from None
        if result.returncode != 0:
            error = self.error_for(result)
            if isinstance(error, SlurmUnavailableError):
                raise error
            message = (result.stderr or result.stdout).strip()
            raise SlurmError(
                f"SLURM refused the job: {message or f'sbatch exit {result.returncode}'}",
                "change the request as SLURM's message says; "
                "`hpctrain render ... --check` asks SLURM without queueing",
            )
        job_id, _cluster = parsers.parse_sbatch_parsable(result.stdout)
        return job_id

    def test_only(self, script: str) -> TestOnlyVerdict:
        """Whether SLURM would accept `script`, and its start, without queueing it
        (slurm/testonly.py)."""
        from hpctrain.slurm import testonly

        return testonly.sbatch_test_only(self, script)

    def scancel(self, job_ids: Sequence[str]) -> None:
        """One `scancel` for all ids."""
        # SLURM 22.05's scancel says nothing (exit 0) for jobs that already ended or that it
        # does not know, so callers decide from the history which ids to send.
        if job_ids:
            self.run(["scancel", *dict.fromkeys(job_ids)])

    def release(self, job_ids: Sequence[str]) -> None:
        """`scontrol release` jobs queued with `sbatch --hold` (one call for all)."""
        if job_ids:
            self.run(["scontrol", "release", ",".join(dict.fromkeys(job_ids))])

    # --- jobs: what SLURM says about them (slurm/jobs.py) -------------------------------------

    def plan_queue(self, job_ids: Sequence[str]) -> QueueQuery:
        """The queue query for `job_ids` as this SLURM and transport ask it (slurm/query.py)."""
        return jobs.plan_queue(self, job_ids)

    def ask_queue(self, q: QueueQuery) -> QueueResult:
        """squeue, then sacct about the jobs it leaves without an end, as `q` says; SlurmError
        when squeue fails, sacct's failure in the result."""
        return jobs.ask_queue(self, q)

    def queue(self, job_ids: Sequence[str]) -> QueueResult:
        """The queue query about `job_ids`, planned and asked."""
        return self.ask_queue(self.plan_queue(job_ids))

    def squeue(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One `squeue` for all ids; jobs the controller has forgotten are simply absent."""
        return jobs.squeue(self, job_ids)

    def sacct(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One `sacct` for all ids (allocations only); AccountingUnavailableError if it can't."""
        return jobs.sacct(self, job_ids)

    def scontrol_job(self, job_id: str) -> JobInfo | None:
        """`scontrol show job ID`; None once the controller has forgotten the job."""
        return jobs.scontrol_job(self, job_id)

    def accounting(self, job_id: str) -> Accounting:
        """Every run and step of one job, from one `sacct`; AccountingUnavailableError if it
        can't."""
        return jobs.job_accounting(self, job_id)

    def pending_start(self, job_id: str) -> tuple[str | None, str | None]:
        """A waiting job's reason and SLURM's start estimate, from one text `squeue` (the same
        on every version); (None, None) once squeue no longer knows the job."""
        return jobs.parse_pending(self.run(jobs.pending_argv(job_id), check=False).stdout)

    def queued_job_ids(self) -> list[str]:
        """Ids of every job the controller still holds (`squeue --noheader --format=%i`)."""
        return self.run(["squeue", "--noheader", "--format=%i"]).stdout.split()

    # --- nodes ---------------------------------------------------------------------------------

    def sinfo(self) -> str:
        """`sinfo`'s own table, for people."""
        return self.run(["sinfo"]).stdout.rstrip()

    def node_states(self) -> dict[str, str]:
        """Each node's short state (idle, alloc, drain, down*, ...), from one `sinfo`."""
        result = self.run(["sinfo", "--noheader", "--Node", "--format=%N %t"])
        return parsers.parse_sinfo_node_states(result.stdout)

    def partition_nodes(self) -> dict[str, list[str]]:
        """Each partition's nodes, from one `sinfo` (a node may be in several)."""
        result = self.run(["sinfo", "--noheader", "--Node", "--format=%N %R"])
        return parsers.parse_sinfo_partition_nodes(result.stdout)

    def node_reasons(self) -> str:
        """Why nodes are down or drained (`sinfo --list-reasons`), for error messages."""
        return self.run(["sinfo", "--list-reasons"]).stdout.strip()

    def resume_nodes(self, nodes: Sequence[str]) -> None:
        """Return drained or down nodes to service (`scontrol update ... State=RESUME`)."""
        if nodes:
            self.run(["scontrol", "update", f"NodeName={','.join(nodes)}", "State=RESUME"])

    # --- what the cluster offers and what you used (slurm/capacity.py) ------------------------

    def availability(self, now: float | None = None) -> availability.Availability:
        """Each partition's GPUs busy and free, its waiting jobs and the maintenance windows
        ahead, in one round trip."""
        from hpctrain.slurm import capacity

        return capacity.ask_availability(self, now)

    def usage(self, days: float, now: float | None = None) -> usage.Usage:
        """Your accounts' GPU-hours over the last `days`, their fair share and what your jobs
        hold, in one round trip."""
        from hpctrain.slurm import capacity

        return capacity.ask_usage(self, days, now)

    def reservations(self) -> list[Reservation]:
        """The cluster's reservations: the answer of `reservations_ahead` where this command
        started it."""
        return ahead.answer(("reservations", id(self)), self._reservations)

    def reservations_ahead(self) -> None:
        """Ask for the reservations in a thread now (hpctrain/startup/ahead.py): a submit's first
        question, while it is still importing."""
        ahead.start(("reservations", id(self)), self._reservations)

    def _reservations(self) -> list[Reservation]:
        from hpctrain.slurm import capacity

        return capacity.ask_reservations(self)

    # --- the cluster's inventory (`hpctrain profiles discover|check`; slurm/survey.py) -------

    def partition_limits(self) -> list[inventory.PartitionInfo]:
        """Every partition with its limits (`scontrol --oneliner show partition`)."""
        from hpctrain.slurm import survey

        return survey.partition_limits(self)

    def node_inventory(self, dialect: Dialect | None = None) -> list[inventory.NodeInfo]:
        """Every node's shape, in JSON where this SLURM has it."""
        from hpctrain.slurm import survey

        return survey.node_inventory(self, dialect)

    def config(self) -> dict[str, str]:
        """slurmctld's running configuration (`scontrol show config`)."""
        from hpctrain.slurm import survey

        return survey.config(self)

    def qos_limits(self) -> list[inventory.QosInfo]:
        """Every QOS with its limits; SlurmError where sacctmgr is refused or absent."""
        from hpctrain.slurm import survey

        return survey.qos_limits(self)

    def associations(self, user: str) -> list[inventory.Association]:
        """The accounts (and QOS) `user` may use; SlurmError where sacctmgr is refused."""
        from hpctrain.slurm import survey

        return survey.associations(self, user)

    def sacctmgr(self, args: Sequence[str]) -> str:
        """`sacctmgr ARGS`; its output, or SlurmError with the whole command."""
        from hpctrain.slurm import survey

        return survey.sacctmgr(self, args)


def _env_timeout() -> float:
    try:
        return float(os.environ.get("HPCTRAIN_SLURM_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S

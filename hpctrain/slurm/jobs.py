"""What SLURM says about jobs: the queue query (squeue, then sacct), scontrol's memory of one
job, a waiting job's start, and one job's whole accounting for `why`.

Each call goes through `SlurmClient` (slurm/client.py), which runs it with a `SlurmRunner`
(slurm/runner.py); the answers are read by the pure parsers of slurm/query.py and friends.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hpctrain.slurm import parsers, parsers_json, query, starts
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.query import QueueQuery, QueueResult
from hpctrain.slurm.runner import AccountingUnavailableError, Result, SlurmRunner, SlurmTimeoutError

if TYPE_CHECKING:
    from hpctrain.slurm.accounting import Accounting


def plan_queue(client: SlurmRunner, job_ids: Sequence[str]) -> QueueQuery:
    """The queue query for `job_ids` in the form this SLURM answers and as its transport
    travels (slurm/query.py)."""
    return query.plan(job_ids, client.dialect(), batches=client.transport.batches)


def ask_queue(client: SlurmRunner, q: QueueQuery) -> QueueResult:
    """squeue about every id, then sacct about those it leaves without an end, as `q` says:
    one round trip over a login, one after the other here. SlurmError when squeue fails;
    sacct's failure is in the result."""
    if not q.ids:
        return QueueResult(q)
    if q.together:
        live, acct = client.run_together((q.squeue_argv(), q.sacct_argv()))
    else:
        live, acct = client.run(q.squeue_argv(), check=False), None
    jobs, found = _read_squeue(client, q.form, live)
    result = QueueResult(q, jobs, found)
    need = result.needing_accounting()
    if not need:
        return result
    try:
        rows = _read_sacct(q.form, acct if acct is not None
                           else _run_sacct(client, q.sacct_argv(need)))
    except AccountingUnavailableError as e:
        return replace(result, accounting_error=e)
    return replace(result, accounting={j: rows[j] for j in need if j in rows})


def squeue(client: SlurmRunner, job_ids: Sequence[str]) -> dict[str, JobInfo]:
    """One `squeue` for all ids; jobs the controller has forgotten are simply absent."""
    if not job_ids:
        return {}
    form = query.form_for(job_ids, client.dialect())
    return _read_squeue(client, form, client.run(form.squeue_argv(job_ids), check=False))[0]


def sacct(client: SlurmRunner, job_ids: Sequence[str]) -> dict[str, JobInfo]:
    """One `sacct` for all ids (allocations only); AccountingUnavailableError if it can't."""
    if not job_ids:
        return {}
    form = query.form_for(job_ids, client.dialect())
    return _read_sacct(form, _run_sacct(client, form.sacct_argv(job_ids)))


def _read_squeue(client: SlurmRunner, form: query.Form, result: Result
                 ) -> tuple[dict[str, JobInfo], dict[str, str | None]]:
    if result.returncode != 0:
        # squeue refuses a job list in which no id is known to the controller any more.
        if "invalid job id" in result.stderr.lower():
            return {}, {}
        raise client.error_for(result)
    return form.read_squeue(result.stdout, time.time())


def _run_sacct(client: SlurmRunner, argv: Sequence[str]) -> Result:
    try:
        return client.run(argv, check=False)
    except SlurmTimeoutError as e:
        raise AccountingUnavailableError(e.what, e.fix) from None


def _read_sacct(form: query.Form, result: Result) -> dict[str, JobInfo]:
    if result.returncode != 0:
        raise AccountingUnavailableError(
            f"sacct failed: {result.said()}",
            "job accounting (slurmdbd) is off or down here; hpctrain falls back to "
            "scontrol and the last state it saw",
        )
    return form.read_sacct(result.stdout)


def scontrol_job(client: SlurmRunner, job_id: str) -> JobInfo | None:
    """`scontrol -o show job ID` (`--json` where the dialect says); None once the controller
    has forgotten the job."""
    json_out = client.dialect().json
    argv = ["scontrol", "--json" if json_out else "--oneliner", "show", "job", job_id]
    result = client.run(argv, check=False)
    if result.returncode != 0:
        if "invalid job id" in (result.stderr + result.stdout).lower():
            return None
        raise client.error_for(result)
    if not json_out:
        return parsers.parse_scontrol_job(result.stdout)
    info = parsers_json.parse_scontrol_job_json(result.stdout, time.time())
    # 24.11's `scontrol --json` answers `"jobs": []` and exit 0 both for a forgotten job and
    # when no controller answers (recorded): only the controller's port tells them apart.
    if info is None and (down := client.transport.controller_down("scontrol")):
        raise down
    return info


def job_accounting(client: SlurmRunner, job_id: str) -> Accounting:
    """Every run and step of one job, in one `sacct` (text on every version: the fields
    `why` reads are the same in all of them); AccountingUnavailableError if it can't."""
    # Imported here: `status` needs none of it, and each module costs start-up on a login.
    from hpctrain.slurm import accounting

    result = _run_sacct(client, accounting.argv(job_id))
    if result.returncode != 0:
        raise AccountingUnavailableError(
            f"sacct failed: {result.said()}",
            "job accounting (slurmdbd) is off or down here; `hpctrain why` needs it")
    return accounting.parse_accounting(result.stdout)


def pending_argv(job_id: str) -> tuple[str, ...]:
    return ("squeue", "--noheader", "--jobs", parsers.job_id_list([job_id]), "--format",
            "%r|%S")


def parse_pending(stdout: str) -> tuple[str | None, str | None]:
    line = next((ln for ln in stdout.splitlines() if "|" in ln), "")
    reason, _, start = line.partition("|")
    return parsers.empty_value(reason), starts.start_or_none(start)

"""A queue query as a value: job ids in; jobs, accounting and start estimates out (pure).

Which commands ask, in which form (text or JSON) and whether they travel together are decided
once per query, by `plan`, from the SLURM dialect (slurm/versions.py) and the ids. Each answer
is read by the parser of the form its command was built in and no other, and no raw answer is
kept for later: a text answer cannot reach the JSON parser (issue 40).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from hpctrain.errors import SlurmError
from hpctrain.slurm import parsers, parsers_json, starts
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.states import JobState
from hpctrain.slurm.versions import Dialect

Starts = Mapping[str, str | None]


def has_tasks(job_ids: Sequence[str]) -> bool:
    """True when an id names a job array's task (a sweep's point: ARRAY_TASK)."""
    return any(parsers.is_array_task(j) for j in job_ids)


def _asked(job_ids: Sequence[str]) -> str:
    """The ids for --jobs: an array task is asked for by its array's id, so one answer lists
    all of a sweep's points however many they are."""
    return parsers.job_id_list(parsers.array_of(j) for j in job_ids)


@dataclass(frozen=True)
class Form:
    """How a query's squeue and sacct ask and so how their answers read."""

    json: bool
    # Some ids are array tasks: asked by their array's id, listed by task.
    tasks: bool

    def squeue_argv(self, job_ids: Sequence[str]) -> tuple[str, ...]:
        if self.json:
            return ("squeue", "--json", "--states=all", "--jobs", parsers.job_id_list(job_ids))
        # The start rides on the same call (`status` shows it for pending jobs).
        return ("squeue", "--noheader", "--states=all", *(("--array",) if self.tasks else ()),
                "--jobs", _asked(job_ids), "--format", parsers.SQUEUE_FORMAT + starts.START_FIELD)

    def sacct_argv(self, job_ids: Sequence[str]) -> tuple[str, ...]:
        if self.json:
            return ("sacct", "--json", "--allocations", "--jobs", parsers.job_id_list(job_ids))
        return ("sacct", "--allocations", "--parsable2", "--noheader", "--jobs", _asked(job_ids),
                "--format", parsers.SACCT_TASK_FORMAT if self.tasks else parsers.SACCT_FORMAT)

    def read_squeue(self, stdout: str, now: float
                    ) -> tuple[dict[str, JobInfo], dict[str, str | None]]:
        """squeue's answer in this form: jobs by id and each one's expected start."""
        if self.json:
            return parsers_json.parse_squeue_json(stdout, now)
        text, found = starts.split_squeue_starts(stdout)
        return parsers.parse_squeue(text), found

    def read_sacct(self, stdout: str) -> dict[str, JobInfo]:
        """sacct's answer in this form: jobs by id."""
        return parsers_json.parse_sacct_json(stdout) if self.json else parsers.parse_sacct(stdout)


def form_for(job_ids: Sequence[str], dialect: Dialect) -> Form:
    """The one choice of text against JSON for squeue and sacct about `job_ids`."""
    # Array tasks are asked in text on every version: --array lists each task as ARRAY_TASK,
    # the id the history keeps, where JSON names only the task's own job id.
    tasks = has_tasks(job_ids)
    return Form(json=dialect.json and not tasks, tasks=tasks)


@dataclass(frozen=True)
class QueueQuery:
    """squeue about every id, then sacct about those squeue leaves without an end state."""

    ids: tuple[str, ...]
    form: Form
    # Where each command costs a round trip (a login): squeue and sacct about every id go
    # together in one; here sacct waits for squeue and asks about fewer jobs.
    together: bool

    def squeue_argv(self) -> tuple[str, ...]:
        return self.form.squeue_argv(self.ids)

    def sacct_argv(self, job_ids: Sequence[str] | None = None) -> tuple[str, ...]:
        """sacct in this query's form, about `job_ids` (default: every id)."""
        return self.form.sacct_argv(self.ids if job_ids is None else job_ids)

    def first_calls(self) -> int:
        """The commands sent before any answer is read, so asked even when squeue fails:
        squeue, with sacct where they travel together."""
        return 0 if not self.ids else 2 if self.together else 1


def plan(job_ids: Sequence[str], dialect: Dialect, *, batches: bool) -> QueueQuery:
    """The query for `job_ids` on the SLURM `dialect` names; `batches`: a round trip a command."""
    ids = tuple(dict.fromkeys(job_ids))
    return QueueQuery(ids, form_for(ids, dialect), together=batches)


def needs_accounting(live: JobInfo | None) -> bool:
    """Whether sacct must be asked after squeue's answer about a job (None: not listed)."""
    # COMPLETED means exit code 0 on every task, so squeue's answer is complete. COMPLETING
    # says the job has ended but not how (cancelled, failed, done): sacct says.
    if live is None or live.state is JobState.COMPLETING:
        return True
    return live.state.is_terminal and live.state is not JobState.COMPLETED


def _frozen(mapping: Mapping[str, object]) -> MappingProxyType[str, object]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class QueueResult:
    """What SLURM said about a query's jobs, at one moment."""

    query: QueueQuery
    # squeue's answer: the jobs the controller still holds.
    jobs: Mapping[str, JobInfo] = field(default_factory=dict)
    # The start squeue gave for each job: expected while it waits, actual after (None: none).
    starts: Starts = field(default_factory=dict)
    # sacct's answer about the jobs that need it (needing_accounting), the others left out.
    accounting: Mapping[str, JobInfo] = field(default_factory=dict)
    # Why sacct could not answer (accounting off or down), if it could not.
    accounting_error: SlurmError | None = None

    def __post_init__(self) -> None:
        for name in ("jobs", "starts", "accounting"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def needing_accounting(self) -> list[str]:
        """The ids sacct is asked about after squeue's answer."""
        return [j for j in self.query.ids if needs_accounting(self.jobs.get(j))]

    def calls(self) -> int:
        """The SLURM commands this answer took: the first ones, then sacct where it was asked
        after squeue's answer."""
        after = not self.query.together and bool(self.needing_accounting())
        return self.query.first_calls() + after

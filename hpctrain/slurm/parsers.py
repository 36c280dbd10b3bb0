"""Pure parsers for the machine-readable output of sbatch, squeue, sacct, scontrol and sinfo.

Each is tested on output recorded from the dev cluster (tests/jobs/recorded/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from hpctrain.errors import SlurmError
from hpctrain.slurm.states import PENDING as WAITING
from hpctrain.slurm.states import JobState, parse_state
from hpctrain.values.units import parse_time_seconds

# squeue has no exit code field (SLURM 22.05), so a job squeue shows as finished is asked of
# sacct once for it. Reason goes last: it is the only free-text field.
SQUEUE_FIELDS = ("%i", "%T", "%M", "%l", "%D", "%N", "%r")
SQUEUE_FORMAT = "|".join(SQUEUE_FIELDS)
SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "Elapsed", "Timelimit", "NNodes", "NodeList",
                "Reason")
SACCT_FORMAT = ",".join(SACCT_FIELDS)
# For array tasks: JobID is ARRAY_TASK (JobIDRaw would be each task's own job id).
SACCT_TASK_FORMAT = ",".join(("JobID", *SACCT_FIELDS[1:]))

# Words SLURM prints where a field has no value.
_EMPTY = {"", "none", "(null)", "none assigned", "n/a"}


@dataclass(frozen=True)
class JobInfo:
    """What SLURM said about one job in one answer; None where it said nothing."""

    job_id: str
    state: JobState
    slurm_state: str
    source: str
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    node_list: str | None = None
    nodes: int | None = None
    elapsed_s: int | None = None
    time_limit_s: int | None = None


def empty_value(text: str) -> str | None:
    """The text, or None where SLURM wrote one of its words for no value."""
    text = text.strip()
    return None if text.lower() in _EMPTY else text


def parse_duration(text: str | None) -> int | None:
    """SLURM durations (`0:05`, `00:05:00`, `1-02:03:04`) in seconds; None for UNLIMITED etc."""
    if text is None:
        return None
    text = text.strip()
    if not text or not text[0].isdigit():
        # UNLIMITED, INVALID, NOT_SET, Partition_Limit
        return None
    try:
        return parse_time_seconds(text)
    except ValueError:
        return None


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """`2:0` -> (2, 0): the exit status and the signal that ended the job."""
    if not text:
        return None, None
    code, _, sig = text.strip().partition(":")
    try:
        return int(code), (int(sig) if sig else 0)
    except ValueError:
        return None, None


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_sbatch_parsable(stdout: str) -> tuple[str, str | None]:
    """`sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`; return both."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise SlurmError("sbatch --parsable printed no job id", "check `squeue --me`")
    # Warnings may come first on stdout with some site wrappers; the id is the last line.
    job_id, _, cluster = lines[-1].partition(";")
    if not re.fullmatch(r"\d+", job_id):
        raise SlurmError(
            f"sbatch --parsable printed {lines[-1]!r} instead of a job id",
            "check `squeue --me`; a site wrapper around sbatch may print extra text",
        )
    return job_id, (cluster or None)


def _rows(stdout: str, n: int) -> Iterator[list[str]]:
    """The lines of a '|'-separated table of `n` fields; the last, free text (a reason), keeps
    any '|' it holds. Blank and short lines are left out."""
    for line in stdout.splitlines():
        parts = line.split("|", n - 1)
        if len(parts) == n:
            yield parts


def parse_squeue(stdout: str) -> dict[str, JobInfo]:
    """Lines of `squeue --noheader --format SQUEUE_FORMAT`, keyed by job id."""
    out: dict[str, JobInfo] = {}
    for parts in _rows(stdout, len(SQUEUE_FIELDS)):
        job_id, state, elapsed, limit, nodes, node_list, reason = (p.strip() for p in parts)
        st = parse_state(state)
        out[job_id] = JobInfo(
            job_id=job_id,
            state=st,
            slurm_state=state,
            source="squeue",
            # squeue's %r says "None" while running and keeps the last reason afterwards.
            reason=empty_value(reason) if st in WAITING else None,
            exit_code=0 if st is JobState.COMPLETED else None,
            signal=0 if st is JobState.COMPLETED else None,
            node_list=empty_value(node_list),
            nodes=_int(nodes),
            elapsed_s=parse_duration(elapsed),
            time_limit_s=parse_duration(limit),
        )
    return out


def parse_sacct(stdout: str) -> dict[str, JobInfo]:
    """Lines of `sacct -X --parsable2 --noheader --format SACCT_FORMAT`, keyed by job id."""
    out: dict[str, JobInfo] = {}
    for parts in _rows(stdout, len(SACCT_FIELDS)):
        info = _sacct_info(*parts)
        # A requeued job has one row per run; the last one is the current run. The tasks of
        # an array that never started are one row (`123_[4-29%2]`): one entry per task here.
        out.update((one, replace(info, job_id=one)) for one in array_task_ids(info.job_id))
    return out


def _sacct_info(job_id: str, state: str, exit_code: str, elapsed: str, limit: str,
                nodes: str, node_list: str, reason: str) -> JobInfo:
    st = parse_state(state)
    code, sig = parse_exit_code(exit_code)
    return JobInfo(
        job_id=job_id.strip(),
        state=st,
        slurm_state=state.strip(),
        source="sacct",
        reason=(empty_value(reason) if not st.is_terminal and st is not JobState.RUNNING
                else None),
        exit_code=code if st.is_terminal else None,
        signal=sig if st.is_terminal else None,
        node_list=empty_value(node_list),
        nodes=_int(nodes),
        elapsed_s=parse_duration(elapsed),
        time_limit_s=parse_duration(limit),
    )


_ARRAY_ROW = re.compile(r"(\d+)_\[([0-9,\-]+)(?:%\d+)?\]")


def array_task_ids(job_id: str) -> list[str]:
    """`123_[4-6,9%2]` (the tasks of an array that never started, as one row) as
    123_4, 123_5, 123_6, 123_9; any other id as it is."""
    m = _ARRAY_ROW.fullmatch(job_id)
    if m is None:
        return [job_id]
    out: list[str] = []
    for part in m.group(2).split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return [job_id]
        out.extend(f"{m.group(1)}_{t}" for t in range(int(low), int(high or low) + 1))
    return out


# A key is a word (with / : _ allowed, e.g. `Socks/Node`, `NtasksPerN:B:S:C`) followed by '='.
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9/:_]*)=")


def parse_scontrol_fields(text: str) -> dict[str, str]:
    """`scontrol -o show job ID` -> {key: value}; values may contain spaces (paths, commands)."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    fields: dict[str, str] = {}
    matches = list(_SCONTROL_KEY.finditer(line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        fields.setdefault(m.group(1), line[m.end():end].strip())
    return fields


def parse_scontrol_job(text: str) -> JobInfo | None:
    """One job from `scontrol -o show job ID`, or None if the text holds none."""
    f = parse_scontrol_fields(text)
    if "JobId" not in f:
        return None
    st = parse_state(f.get("JobState"))
    code, sig = parse_exit_code(f.get("ExitCode"))
    return JobInfo(
        job_id=f["JobId"],
        state=st,
        slurm_state=f.get("JobState", ""),
        source="scontrol",
        reason=empty_value(f.get("Reason", "")) if not st.is_terminal else None,
        exit_code=code if st.is_terminal else None,
        signal=sig if st.is_terminal else None,
        node_list=empty_value(f.get("NodeList", "")),
        nodes=_int(f.get("NumNodes", "").split("-")[0]),
        elapsed_s=parse_duration(f.get("RunTime")),
        time_limit_s=parse_duration(f.get("TimeLimit")),
    )


def _conf_items(conf_text: str) -> Iterable[tuple[str, str]]:
    """(lower-cased key, value) of each `Key=value` line of slurm.conf, comments dropped."""
    for raw in conf_text.splitlines():
        key, sep, value = raw.split("#", 1)[0].strip().partition("=")
        if sep:
            yield key.strip().lower(), value.strip()


def parse_cluster_name(conf_text: str) -> str | None:
    """ClusterName from slurm.conf text (keys are case-insensitive; last one wins)."""
    name = None
    for key, value in _conf_items(conf_text):
        if key == "clustername":
            name = value.split()[0] if value else None
    # slurmctld lower-cases the name it registers with accounting.
    return name.lower() if name else None


DEFAULT_SLURMCTLD_PORT = 6817
# Before SLURM 18.08 the controllers were named by these pairs instead of SlurmctldHost.
_LEGACY_CONTROLLERS = (("controlmachine", "controladdr"), ("backupcontroller", "backupaddr"))


def parse_controllers(conf_text: str) -> list[tuple[str, str, int]]:
    """(name, address, port) of each slurmctld that slurm.conf names, the primary first."""
    hosts: list[tuple[str, str]] = []
    legacy: dict[str, str] = {}
    port = DEFAULT_SLURMCTLD_PORT
    for key, value in _conf_items(conf_text):
        word = value.split()[0] if value else ""
        if key == "slurmctldhost" and word:
            # `SlurmctldHost=name(address)`, or just `name`.
            name, _, address = word.partition("(")
            hosts.append((name, address.rstrip(")") or name))
        elif key == "slurmctldport" and word:
            # A range (`6817-6818`) means slurmctld listens on each of its ports.
            port = _int(word.split("-", 1)[0]) or port
        elif word:
            legacy[key] = word
    if not hosts:
        hosts = [(legacy[n], legacy.get(a, legacy[n])) for n, a in _LEGACY_CONTROLLERS
                 if n in legacy]
    return [(name, address, port) for name, address in hosts]


def parse_sinfo_node_states(stdout: str) -> dict[str, str]:
    """`sinfo --noheader --Node --format='%N %t'` -> {node: short state, e.g. 'idle', 'down*'}."""
    states: dict[str, str] = {}
    for line in stdout.splitlines():
        name, _, state = line.strip().partition(" ")
        if name:
            # A node in several partitions has one line per partition, all with one state.
            states[name] = state.strip()
    return states


def parse_sinfo_partition_nodes(stdout: str) -> dict[str, list[str]]:
    """`sinfo --noheader --Node --format='%N %R'` -> {partition: its nodes, in order}."""
    nodes: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        name, _, partition = line.strip().partition(" ")
        if name and partition.strip():
            nodes.setdefault(partition.strip(), []).append(name)
    return nodes


def is_array_task(job_id: str) -> bool:
    """`123_4`: task 4 of job array 123 (a sweep's point)."""
    array, sep, task = job_id.partition("_")
    return bool(sep) and array.isdigit() and task.isdigit()


def array_of(job_id: str) -> str:
    """The array's job id of a task id; any other id as it is."""
    return job_id.partition("_")[0] if is_array_task(job_id) else job_id


def job_id_list(ids: Iterable[str]) -> str:
    """Ids for `-j`: comma-separated, deduplicated, in order."""
    return ",".join(dict.fromkeys(ids))

"""The one map from SLURM's job state strings to hpctrain's JobState (pure)."""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    """A job's state as hpctrain reports it; UNKNOWN for anything SLURM adds later."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    SUSPENDED = "SUSPENDED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        """True once SLURM will never change the state again (hpctrain stops asking)."""
        return self in TERMINAL

    @property
    def group(self) -> StateGroup:
        """Which of the four groups the state belongs to: what a display needs to know."""
        for group, members in _GROUPS.items():
            if self in members:
                return group
        return StateGroup.UNKNOWN


class StateGroup(str, Enum):
    """The states as people read them: waiting, working, ended well, ended badly."""

    PENDING = "pending"
    RUNNING = "running"
    ENDED = "ended"
    FAILED = "failed"
    UNKNOWN = "unknown"


# PREEMPTED counts as terminal: a job requeued after preemption shows as PENDING/REQUEUED in
# squeue before hpctrain caches anything, and sacct -X reports the requeued record's state.
TERMINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)

# A requeued or suspended job waits to run again; COMPLETING still holds its nodes.
PENDING = frozenset({JobState.PENDING, JobState.REQUEUED, JobState.SUSPENDED})
RUNNING = frozenset({JobState.RUNNING, JobState.COMPLETING})
ENDED = TERMINAL
FAILED = TERMINAL - {JobState.COMPLETED}
_GROUPS = {
    StateGroup.PENDING: PENDING,
    StateGroup.RUNNING: RUNNING,
    StateGroup.ENDED: frozenset({JobState.COMPLETED}),
    StateGroup.FAILED: FAILED,
}

# Long names (squeue %T, sacct State, scontrol JobState) and squeue's short codes (%t).
_ALIASES: dict[str, JobState] = {
    # Allocated, nodes still booting: the user's program has not started.
    "CONFIGURING": JobState.PENDING,
    "CF": JobState.PENDING,
    "PD": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "R": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "RS": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SI": JobState.RUNNING,
    "CG": JobState.COMPLETING,
    "STAGE_OUT": JobState.COMPLETING,
    "SO": JobState.COMPLETING,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "CA": JobState.CANCELLED,
    # A federation sibling was withdrawn because another sibling started the job.
    "REVOKED": JobState.CANCELLED,
    "RV": JobState.CANCELLED,
    "TO": JobState.TIMEOUT,
    "OOM": JobState.OUT_OF_MEMORY,
    "NF": JobState.NODE_FAIL,
    "PR": JobState.PREEMPTED,
    "RQ": JobState.REQUEUED,
    "REQUEUE_FED": JobState.REQUEUED,
    "RF": JobState.REQUEUED,
    "REQUEUE_HOLD": JobState.REQUEUED,
    "RH": JobState.REQUEUED,
    # Requeued and held after the job's exit code matched SchedulerParameters' special exit.
    "SPECIAL_EXIT": JobState.REQUEUED,
    "SE": JobState.REQUEUED,
    "S": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
}


def parse_state(text: str | None) -> JobState:
    """Map a SLURM state string to a JobState.

    Handles sacct's `CANCELLED by 1234`, the `+` that fixed-width output leaves on truncated
    names (`OUT_OF_ME+`), flag suffixes some versions print (`COMPLETING+`) and short codes.
    """
    if not text:
        return JobState.UNKNOWN
    word = text.strip().split(" ", 1)[0].rstrip("+").upper()
    if not word:
        return JobState.UNKNOWN
    try:
        return JobState(word)
    except ValueError:
        pass
    if word in _ALIASES:
        return _ALIASES[word]
    if word.startswith("OUT_OF_ME"):
        return JobState.OUT_OF_MEMORY
    return JobState.UNKNOWN

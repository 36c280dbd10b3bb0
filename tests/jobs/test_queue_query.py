"""Queue queries through a login (squeue and sacct in one round trip), on output recorded from
the dev cluster's SLURM 22.05 and 24.11: each answer is read by the parser of the form it was
asked in, whatever mix of sweep points and plain jobs the history holds."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpctrain.history import History
from hpctrain.slurm.client import Result, SlurmClient
from hpctrain.slurm.transport import ControllerDownError
from hpctrain.tracking.watcher import JobWatcher
from tests.recorded import UnrecordedCommandError, pick_recording

from .helpers import RECORDED, SETS, recorded_jobs, recording, track

CLUSTER = "hpctrain-dev"
# What each set's `sinfo --version` said (its MANIFEST.json).
VERSIONS = {"slurm-22.05": "slurm-wlm 22.05.8", "slurm-24.11": "slurm 24.11.5"}


class RecordedLogin:
    """A login's transport as hpctrain.remote's is (`batches`; the login's `sinfo --version`
    known from its facts), whose commands answer with recordings of the same command line
    (job ids aside), or fail as the tests' ReplayClient does."""

    batches = True

    def __init__(self, answers: dict[str, Sequence[Result]], version: str) -> None:
        self.answers = answers
        self.version = version
        self.asked: list[tuple[str, ...]] = []
        self.round_trips = 0

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> tuple[str, str, int]:
        self.round_trips += 1
        return self._answer(argv)

    def execute_many(self, argvs: Sequence[tuple[str, ...]], limit: float
                     ) -> list[tuple[str, str, int]]:
        self.round_trips += 1
        return [self._answer(a) for a in argvs]

    def _answer(self, argv: tuple[str, ...]) -> tuple[str, str, int]:
        self.asked.append(argv)
        if argv[0] not in self.answers:
            raise UnrecordedCommandError(f"no recording answers `{shlex.join(argv)}`")
        res = pick_recording(argv, self.answers[argv[0]])
        return res.stdout, res.stderr, res.returncode

    def conf_path(self) -> str | None:
        return None

    def controller_down(self, command: str) -> ControllerDownError | None:
        return None

    def cluster_name(self) -> str | None:
        return CLUSTER

    def slurm_version_text(self) -> str | None:
        return self.version


def _array(slurm: str) -> str:
    return str(json.loads((RECORDED.parent / slurm / "arrays.json").read_text())["array"])


def _text(slurm: str, name: str) -> Result:
    """The text form of a recording: 24.11's JSON ones have a `_text` twin, 22.05's are text."""
    return recording(f"{name}_text" if slurm == "slurm-24.11" else name, slurm)


def _mixed_answers(slurm: str, gone: str) -> dict[str, Sequence[Result]]:
    """squeue and sacct asked in text about a sweep's points and plain jobs together: squeue
    lists only the array (the plain job has left it); sacct's lines for the array and for the
    plain job, each as that SLURM printed it in the same format (a plain job's JobID is its
    JobIDRaw), in one answer."""
    acct = recording("sacct_array_tasks", slurm)
    line = next(ln for ln in _text(slurm, "sacct_after").stdout.splitlines()
                if ln.split("|")[0] == gone)
    both = Result(acct.argv, acct.returncode, f"{acct.stdout}{line}\n", acct.stderr)
    return {"squeue": [recording("squeue_array_tasks", slurm)], "sacct": [both]}


@pytest.mark.parametrize("slurm", SETS)
def test_status_through_a_login_with_a_point_and_a_job_gone_from_squeue(
        history: History, slurm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's failure: on 23.02 and later the one round trip asked in text, then read
    sacct's text as JSON (`sacct --json printed something that is not JSON`)."""
    monkeypatch.delenv("HPCTRAIN_SLURM_JSON", raising=False)
    point, gone = f"{_array(slurm)}_3", recorded_jobs(slurm)["completed"]
    track(history, point, gone)
    login = RecordedLogin(_mixed_answers(slurm, gone), VERSIONS[slurm])
    watcher = JobWatcher(SlurmClient(login, timeout_s=5), history, CLUSTER)
    records, report = watcher.refresh(history.all())
    assert report.error is None and report.warnings == []
    got = {r.job_id: r for r in records}
    assert got[point].state == "RUNNING" and not got[point].terminal
    assert got[gone].state == "COMPLETED" and got[gone].exit_code == 0 and got[gone].terminal
    # One round trip, both commands in text (JSON names a point by its own job id).
    assert login.round_trips == 1 and [a[0] for a in login.asked] == ["squeue", "sacct"]
    assert all("--json" not in a for a in login.asked)
    # Stored in the history, not just returned.
    assert {r.job_id: r.state for r in history.all()} == {point: "RUNNING", gone: "COMPLETED"}

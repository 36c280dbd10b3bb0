"""Queue queries through a login (squeue and sacct in one round trip), on output recorded from
the dev cluster's SLURM 22.05 and 24.11: each answer is read by the parser of the form it was
asked in, whatever mix of sweep points and plain jobs the history holds."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpctrain.history import History
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.query import Form, QueueResult, plan
from hpctrain.slurm.runner import Result
from hpctrain.slurm.transport import ControllerDownError
from hpctrain.slurm.versions import dialect_for
from hpctrain.tracking import byplace
from hpctrain.tracking.watcher import JobWatcher
from tests.recorded import UnrecordedCommandError, pick_recording

from .helpers import RECORDED, SETS, ReplayClient, here, recorded_jobs, recording, track

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
    assert report.calls == len(login.asked)
    assert all("--json" not in a for a in login.asked)
    # Stored in the history, not just returned.
    assert {r.job_id: r.state for r in history.all()} == {point: "RUNNING", gone: "COMPLETED"}
    # The refresh returns the query's answer: squeue's start of the point, sacct's of the job.
    assert report.query is not None and report.query.starts[point]
    assert set(report.query.accounting) == {gone}


def test_plain_jobs_through_a_login_on_24_11_ask_both_in_json(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCTRAIN_SLURM_JSON", raising=False)
    jobs = recorded_jobs("slurm-24.11")
    track(history, *jobs.values())
    login = RecordedLogin({"squeue": [recording("squeue_after", "slurm-24.11")],
                           "sacct": [recording("sacct_after", "slurm-24.11")]},
                          VERSIONS["slurm-24.11"])
    records, report = JobWatcher(SlurmClient(login, timeout_s=5), history, CLUSTER).refresh(
        history.all())
    assert login.round_trips == 1 and report.calls == 2
    assert all("--json" in a for a in login.asked)
    got = {r.job_id: r for r in records}
    assert got[jobs["failed"]].state == "FAILED" and got[jobs["failed"]].exit_code == 3
    assert got[jobs["timeout"]].state == "TIMEOUT" and got[jobs["timeout"]].terminal
    assert got[jobs["running2"]].state == "COMPLETED"


def test_the_form_is_chosen_once_for_the_whole_query() -> None:
    new, old = dialect_for((24, 11), {}), dialect_for((22, 5), {})
    mixed = plan(["422_3", "17"], new, batches=False)
    # sacct about the plain job alone still asks in the query's form, which squeue answered in.
    assert "--json" not in mixed.squeue_argv() and "--json" not in mixed.sacct_argv(["17"])
    assert "--array" in mixed.squeue_argv() and mixed.sacct_argv()[5] == "422,17"
    plain = plan(["17", "18", "17"], new, batches=True)
    assert plain.ids == ("17", "18") and plain.together
    assert plain.form == Form(json=True, tasks=False) and "--json" in plain.sacct_argv()
    assert plan(["17"], old, batches=False).form == Form(json=False, tasks=False)
    forced = dialect_for((24, 11), {"HPCTRAIN_SLURM_JSON": "0"})
    assert plan(["17"], forced, batches=False).form.json is False


def test_a_query_result_is_a_value() -> None:
    q = plan(["17"], dialect_for((24, 11), {}), batches=False)
    given: dict[str, str | None] = {"17": "2026-11-24T12:22:11"}
    result = QueueResult(q, starts=given)
    given["17"] = None
    assert result.starts["17"] == "2026-11-24T12:22:11"
    with pytest.raises(TypeError):
        result.starts["17"] = None  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.starts = {}  # type: ignore[misc]
    assert result.needing_accounting() == ["17"]


def test_a_refresh_by_place_returns_states_starts_and_cluster(history: History,
                                                              tmp_path: Path) -> None:
    """What `status` shows comes back as one value: no list or dict filled on the side."""
    jobs = recorded_jobs("slurm-22.05")
    track(history, *jobs.values())
    client = ReplayClient({"squeue": recording("squeue_mixed", "slurm-22.05"),
                           "sacct": recording("sacct_mixed", "slurm-22.05")}, slurm="slurm-22.05")
    got = byplace.refresh(history, here(client, tmp_path), history.all(), None)
    assert got.cluster == CLUSTER and got.report.calls == 2 and got.report.error is None
    assert got.starts[jobs["begintime"]] == "2026-11-24T04:36:08"
    assert got.starts[jobs["resources"]] is None
    states = {r.job_id: r.state for r in got.records}
    assert states[jobs["running2"]] == "RUNNING" and states[jobs["failed"]] == "FAILED"
    # Nothing to ask: nothing asked, and no start from an earlier refresh.
    again = byplace.refresh(history, here(client, tmp_path), [], None)
    assert again.starts == {} and again.records == [] and again.report.calls == 0


def test_accounting_off_at_a_login_is_a_warning_not_a_failure(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """sacct's refusal travels in the query's result: squeue's answer of the same round trip
    stands, and the controller is asked about the jobs it still showed."""
    monkeypatch.delenv("HPCTRAIN_SLURM_JSON", raising=False)
    jobs = recorded_jobs("slurm-24.11")
    track(history, *jobs.values())
    login = RecordedLogin({"squeue": [recording("squeue_after", "slurm-24.11")],
                           "sacct": [recording("sacct_disabled", "slurm-24.11")],
                           "scontrol": [recording("scontrol_unknown", "slurm-24.11")]},
                          VERSIONS["slurm-24.11"])
    watcher = JobWatcher(SlurmClient(login, timeout_s=5), history, CLUSTER)
    records, report = watcher.refresh(history.all())
    assert report.error is None
    assert any("accounting storage is disabled" in w for w in report.warnings)
    assert report.query is not None and report.query.accounting == {}
    assert [a[0] for a in login.asked[:2]] == ["squeue", "sacct"]
    assert {a[0] for a in login.asked[2:]} <= {"scontrol"}
    # Counted from what the refresh asked, as the login's transport saw it.
    assert report.calls == len(login.asked)
    got = {r.job_id: r for r in records}
    assert got[jobs["timeout"]].state == "TIMEOUT" and got[jobs["timeout"]].terminal

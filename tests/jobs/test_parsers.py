"""The SLURM output parsers and the state map, on output recorded from the dev cluster."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from hpctrain.errors import SlurmError
from hpctrain.slurm import parsers as p
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import Result
from hpctrain.slurm.states import TERMINAL, JobState, parse_state
from hpctrain.slurm.versions import dialect_for
from tests.recorded import (
    MANIFEST,
    RECORDED_DIRS,
    UnrecordedCommandError,
    check_replay,
    manifest_folders,
    manifest_problems,
)

from .helpers import RECORDED, SETS, ReplayClient, recorded_jobs, recording

J = recorded_jobs()


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("PENDING", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("COMPLETING", JobState.COMPLETING),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED by 123456", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("OUT_OF_ME+", JobState.OUT_OF_MEMORY),
        ("NODE_FAIL", JobState.NODE_FAIL),
        ("TIMEOUT", JobState.TIMEOUT),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.REQUEUED),
        ("STOPPED", JobState.SUSPENDED),
        ("PD", JobState.PENDING),
        ("CG", JobState.COMPLETING),
        ("OOM", JobState.OUT_OF_MEMORY),
        ("  running ", JobState.RUNNING),
        ("SOMETHING_NEW", JobState.UNKNOWN),
        ("", JobState.UNKNOWN),
        (None, JobState.UNKNOWN),
    ],
)
def test_parse_state(text: str | None, state: JobState) -> None:
    assert parse_state(text) is state


def test_terminal_states() -> None:
    assert {s for s in JobState if s.is_terminal} == TERMINAL
    for live in (JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.REQUEUED,
                 JobState.SUSPENDED):
        assert not live.is_terminal
    # Unknown states are asked about again rather than cached as final.
    assert not JobState.UNKNOWN.is_terminal


def test_sbatch_parsable_recorded() -> None:
    assert p.parse_sbatch_parsable(recording("sbatch_parsable").stdout) == (J["completed"], None)
    assert p.parse_sbatch_parsable("123;raven\n") == ("123", "raven")


def test_sbatch_parsable_rejects_garbage() -> None:
    with pytest.raises(SlurmError, match="instead of a job id"):
        p.parse_sbatch_parsable("Submitted batch job 12\n")
    with pytest.raises(SlurmError, match="no job id"):
        p.parse_sbatch_parsable("")


def _jobs(slurm: str) -> dict[str, str]:
    return recorded_jobs(slurm)


def _ask(program: str, name: str, slurm: str) -> dict[str, p.JobInfo]:
    """The client's `program` (squeue or sacct) of every job of the set `slurm`, answered by
    its recording `name`: text on 22.05, JSON on 24.11, as the client asks each."""
    client = ReplayClient({program: recording(name, slurm)}, slurm=slurm)
    ids = list(_jobs(slurm).values())
    return client.squeue(ids) if program == "squeue" else client.sacct(ids)


@pytest.mark.parametrize("slurm", SETS)
def test_squeue_recorded_mixed_states(slurm: str) -> None:
    J = _jobs(slurm)
    rows = _ask("squeue", "squeue_mixed", slurm)
    assert set(rows) == set(J.values())
    run = rows[J["running2"]]
    assert run.state is JobState.RUNNING and run.nodes == 2 and run.node_list == "node[1-2]"
    assert run.reason is None and run.time_limit_s == 60 and run.elapsed_s is not None
    assert rows[J["dependency"]].state is JobState.PENDING
    assert rows[J["dependency"]].reason == "Dependency"
    assert rows[J["begintime"]].reason == "BeginTime"
    assert rows[J["resources"]].reason == "Resources"
    assert rows[J["dependency"]].node_list is None
    done = rows[J["completed"]]
    # COMPLETED means exit 0 by definition; squeue's text has no exit code for other ends.
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    failed = rows[J["failed"]]
    assert failed.state is JobState.FAILED and failed.reason is None
    assert failed.exit_code == (None if slurm == "slurm-22.05" else 3)
    assert rows[J["cancelled"]].state is JobState.CANCELLED
    assert all(r.source == "squeue" for r in rows.values())


@pytest.mark.parametrize("slurm", SETS)
def test_squeue_recorded_after_purge(slurm: str) -> None:
    J = _jobs(slurm)
    rows = _ask("squeue", "squeue_after", slurm)
    # MinJobAge=30 on the dev cluster: only the jobs that ended in the last 30 s remain.
    timeout = rows[J["timeout"]]
    assert timeout.state is JobState.TIMEOUT
    assert timeout.elapsed_s is not None and timeout.elapsed_s >= timeout.time_limit_s == 60
    assert J["completed"] not in rows


@pytest.mark.parametrize("slurm", SETS)
def test_sacct_recorded_mixed_states(slurm: str) -> None:
    J = _jobs(slurm)
    rows = _ask("sacct", "sacct_mixed", slurm)
    assert set(rows) == set(J.values())
    failed = rows[J["failed"]]
    assert failed.state is JobState.FAILED and (failed.exit_code, failed.signal) == (3, 0)
    cancelled = rows[J["cancelled"]]
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.node_list is None  # "None assigned"
    assert rows[J["dependency"]].exit_code is None
    assert rows[J["running2"]].state is JobState.RUNNING
    assert rows[J["running2"]].node_list == "node[1-2]"
    assert rows[J["completed"]].exit_code == 0
    assert all(r.source == "sacct" for r in rows.values())


@pytest.mark.parametrize(("slurm", "reason"), [("slurm-22.05", "Dependency"),
                                                ("slurm-24.11", None)])
def test_sacct_pending_reason_by_version(slurm: str, reason: str | None) -> None:
    """22.05's accounting keeps a pending job's reason; 24.11's says None in both forms (the
    reason a user sees comes from squeue, which both versions give)."""
    J = _jobs(slurm)
    rows = _ask("sacct", "sacct_mixed", slurm)
    assert rows[J["dependency"]].reason == reason


def test_sacct_text_names_who_cancelled() -> None:
    rows = _ask("sacct", "sacct_mixed", "slurm-22.05")
    assert rows[_jobs("slurm-22.05")["cancelled"]].slurm_state.startswith("CANCELLED by")


def test_squeue_json_knows_the_exit_code_of_an_ended_job() -> None:
    """Where the text needs sacct for it, the JSON gives it: a job that exited 3."""
    J = _jobs("slurm-24.11")
    failed = _ask("squeue", "squeue_mixed", "slurm-24.11")[J["failed"]]
    assert (failed.state, failed.exit_code, failed.signal) == (JobState.FAILED, 3, 0)


@pytest.mark.parametrize("slurm", SETS)
def test_sacct_recorded_final_states(slurm: str) -> None:
    J = _jobs(slurm)
    rows = _ask("sacct", "sacct_after", slurm)
    assert rows[J["timeout"]].state is JobState.TIMEOUT
    timeout = rows[J["timeout"]]
    assert timeout.elapsed_s is not None and timeout.elapsed_s >= timeout.time_limit_s == 60
    assert rows[J["running2"]].state is JobState.COMPLETED
    # A job that ended carries no pending reason even if sacct keeps the old one.
    assert rows[J["dependency"]].reason is None
    assert all(r.state.is_terminal for r in rows.values())


# What both forms must agree on; a running job's elapsed time moves between the two asks.
_SAME = ("state", "reason", "exit_code", "signal", "node_list", "nodes", "time_limit_s")


@pytest.mark.parametrize("name", ["squeue_mixed", "squeue_after", "sacct_mixed", "sacct_after"])
def test_json_and_text_agree_on_the_same_jobs(name: str) -> None:
    """SLURM 24.11 answered both forms for the same jobs, moments apart: states, reasons,
    exit codes, times and node lists read the same from either."""
    slurm = "slurm-24.11"
    program = name.split("_")[0]
    as_json = _ask(program, name, slurm)
    client = ReplayClient({program: recording(f"{name}_text", slurm)}, slurm=slurm)
    client._dialect = dialect_for(client.dialect().version, {"HPCTRAIN_SLURM_JSON": "0"})
    ids = list(_jobs(slurm).values())
    as_text = client.squeue(ids) if program == "squeue" else client.sacct(ids)
    assert set(as_json) == set(as_text)
    for job_id, j in as_json.items():
        t = as_text[job_id]
        for f in _SAME:
            if program == "squeue" and f in ("exit_code", "signal") and getattr(t, f) is None:
                continue  # squeue's text has no exit code; its JSON has (test below)
            assert getattr(j, f) == getattr(t, f), (job_id, f, j, t)
        if j.state is not JobState.RUNNING:
            assert j.elapsed_s == t.elapsed_s, (job_id, j, t)


def test_sacct_reason_with_pipe_is_kept_whole() -> None:
    rows = p.parse_sacct("7|PENDING|0:0|00:00:00|UNLIMITED|1|None assigned|odd|reason\n")
    assert rows["7"].reason == "odd|reason" and rows["7"].time_limit_s is None


def test_scontrol_recorded() -> None:
    run = p.parse_scontrol_job(recording("scontrol_running2").stdout)
    assert run is not None and run.job_id == J["running2"]
    assert run.state is JobState.RUNNING and run.nodes == 2 and run.node_list == "node[1-2]"
    fields = p.parse_scontrol_fields(recording("scontrol_running2").stdout)
    # Values with spaces and '|' (job name, paths) survive.
    assert fields["JobName"] == "two nodes|pipe"
    assert fields["StdOut"].endswith("/two nodes|pipe-" + J["running2"] + ".out")
    assert fields["Command"].endswith("-sleep25-exit0.sh")
    dep = p.parse_scontrol_job(recording("scontrol_dependency").stdout)
    assert dep is not None and dep.state is JobState.PENDING and dep.reason == "Dependency"
    assert dep.node_list is None
    done = p.parse_scontrol_job(recording("scontrol_completed").stdout)
    assert done is not None and done.state is JobState.COMPLETED and done.exit_code == 0
    assert p.parse_scontrol_job(recording("scontrol_unknown").stdout) is None


@pytest.mark.parametrize("slurm", SETS)
def test_scontrol_recorded_through_the_client(slurm: str) -> None:
    """scontrol show job as the client asks it: text on 22.05, JSON on 24.11, read alike."""
    J = _jobs(slurm)

    def ask(name: str, job: str) -> p.JobInfo | None:
        return ReplayClient({"scontrol": recording(name, slurm)}, slurm=slurm).scontrol_job(job)

    run = ask("scontrol_running2", J["running2"])
    assert run is not None and run.job_id == J["running2"] and run.source == "scontrol"
    assert run.state is JobState.RUNNING and run.nodes == 2 and run.node_list == "node[1-2]"
    assert run.time_limit_s == 60 and run.elapsed_s is not None
    dep = ask("scontrol_dependency", J["dependency"])
    assert dep is not None and dep.state is JobState.PENDING and dep.reason == "Dependency"
    assert dep.node_list is None
    done = ask("scontrol_completed", J["completed"])
    assert done is not None and done.state is JobState.COMPLETED and done.exit_code == 0
    assert ask("scontrol_unknown", "999999") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0:05", 5), ("1:00", 60), ("00:01:01", 61), ("1:02:03", 3723), ("1-02:03:04", 93784),
     ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("", None), (None, None)],
)
def test_parse_duration(text: str | None, seconds: int | None) -> None:
    assert p.parse_duration(text) == seconds


def test_parse_exit_code() -> None:
    assert p.parse_exit_code("3:0") == (3, 0)
    assert p.parse_exit_code("0:9") == (0, 9)
    assert p.parse_exit_code("") == (None, None)
    assert p.parse_exit_code("x") == (None, None)


def test_cluster_name_from_conf() -> None:
    conf = "# ClusterName=commented\nclustername=Raven  # site\nSlurmctldPort=1\n"
    assert p.parse_cluster_name(conf) == "raven"
    assert p.parse_cluster_name("SlurmctldPort=1\n") is None


def test_job_id_list_dedups_in_order() -> None:
    assert p.job_id_list(["3", "1", "3", "2"]) == "3,1,2"


# --- the recordings' provenance and the replay rule -------------------------------------------


@pytest.mark.parametrize("root", RECORDED_DIRS, ids=lambda p: p.parent.name)
def test_every_recorded_file_names_its_provenance(root: Path) -> None:
    """Each recorded file is in its folder's MANIFEST.json, with command, program, machine and
    date, and each entry's file exists (a JSON recording's argv is the command named)."""
    assert manifest_folders(root), f"{root} has no {MANIFEST}"
    assert manifest_problems(root) == []


def test_the_manifest_check_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("x\n")
    (tmp_path / "squeue_x.json").write_text(json.dumps({"argv": ["squeue", "--noheader"]}))
    entry = {"program": "squeue (slurm 22.05.8)", "machine": "m", "date": "2026-11-24"}
    (tmp_path / MANIFEST).write_text(json.dumps({"files": {
        "squeue_x.json": {**entry, "command": "squeue --all"},
        "gone.json": {**entry, "command": "sinfo"}}}))
    problems = "\n".join(manifest_problems(tmp_path))
    assert "kept.txt: not in MANIFEST.json" in problems
    assert "gone.json: listed in MANIFEST.json but missing" in problems
    assert "names `squeue --all`, the file `squeue --noheader`" in problems


def test_the_replay_client_refuses_a_command_line_it_has_no_recording_of() -> None:
    mixed = recording("squeue_mixed")
    client = ReplayClient({"squeue": mixed})
    # The client's own squeue, for other job ids than the recording's: answered.
    assert set(client.squeue([J["running2"]])) == set(J.values())
    # The format of an older client (without the start field): refused, naming both lines.
    old_format = [*mixed.argv[:-1], p.SQUEUE_FORMAT]
    with pytest.raises(UnrecordedCommandError) as e:
        client.run(old_format)
    assert shlex.join(old_format) in str(e.value) and shlex.join(mixed.argv) in str(e.value)
    with pytest.raises(UnrecordedCommandError, match="squeue --noheader --format=%i"):
        client.queued_job_ids()
    # A program the test gave no recording for.
    with pytest.raises(UnrecordedCommandError, match="replays \\['squeue'\\] only"):
        client.scontrol_job(J["running2"])


# The client's call that made each kind of recording in the set (by its name's first word).
_ASKS: dict[str, Callable[[SlurmClient], object]] = {
    "squeue": lambda c: c.squeue(["1"]), "sacct": lambda c: c.sacct(["1"]),
    "scontrol": lambda c: c.scontrol_job("1"), "scancel": lambda c: c.scancel(["1"]),
    "sbatch": lambda c: c.submit("job.sh"),
}


def _recorded_names() -> list[tuple[str, str]]:
    return [(slurm, f.stem) for slurm in SETS
            for f in sorted((RECORDED.parent / slurm).glob("*.json"))
            if f.stem.split("_")[0] in _ASKS]


@pytest.mark.parametrize(("slurm", "name"), _recorded_names())
def test_each_recording_answers_the_command_line_the_client_asks_now(slurm: str,
                                                                     name: str) -> None:
    """A recording made by hand or by an older client (the controller-down ones lacked the
    start field the state listing asks for) fails here, not only where a test replays it.
    On 24.11 the client asks in JSON; `<name>_text` holds what it asks with JSON turned off."""
    asked: list[tuple[str, ...]] = []

    def answer(argv: tuple[str, ...]) -> Result:
        asked.append(argv)
        return Result(argv, 0, "1\n" if argv[0] == "sbatch" else "", "")

    program = name.split("_")[0]
    client = ReplayClient({program: answer}, slurm=slurm)
    if name.endswith("_text"):
        client._dialect = dialect_for(client.dialect().version, {"HPCTRAIN_SLURM_JSON": "0"})
    with contextlib.suppress(SlurmError):  # an empty JSON answer is refused after the ask
        if "_array_" in name:
            # A sweep's points: tasks of a job array, asked about by their array's id.
            getattr(client, program)(["1_0", "1_1"])
        else:
            _ASKS[program](client)
    check_replay(asked[0], recording(name, slurm))


@pytest.mark.parametrize(("version", "env", "json_out", "because"), [
    ((22, 5), {}, False, "JSON only from 23.02"),
    ((23, 2), {}, True, "JSON since 23.02"),
    ((24, 11), {}, True, "JSON since 23.02"),
    (None, {}, False, "version unknown"),
    ((24, 11), {"HPCTRAIN_SLURM_JSON": "0"}, False, "HPCTRAIN_SLURM_JSON=0"),
    ((22, 5), {"HPCTRAIN_SLURM_JSON": "1"}, True, "HPCTRAIN_SLURM_JSON=1"),
    ((22, 5), {"HPCTRAIN_SLURM_JSON": "yes"}, False, "JSON only from 23.02"),
])
def test_the_dialect_follows_the_version_unless_forced(
    version: tuple[int, int] | None, env: dict[str, str], json_out: bool, because: str
) -> None:
    dialect = dialect_for(version, env)
    assert dialect.json is json_out and because in dialect.because
    name = "unknown" if version is None else f"{version[0]}.{version[1]:02d}"
    assert dialect.describe().startswith(f"SLURM {name}: {'JSON' if json_out else 'text'}")


def test_json_states_show_as_the_text_shows_them() -> None:
    """The flag SLURM's text prints wins over the base state, in SLURM's order."""
    from hpctrain.slurm.parsers_json import shown_state

    assert shown_state(["RUNNING"]) == "RUNNING"
    assert shown_state(["COMPLETED", "COMPLETING"]) == "COMPLETING"
    assert shown_state(["PENDING", "REQUEUED"]) == "REQUEUED"
    assert shown_state(["PENDING", "REQUEUE_HOLD", "REQUEUED"]) == "REQUEUED"
    assert shown_state("RUNNING") == "RUNNING" and shown_state([]) == ""


def test_json_that_is_not_json_is_a_clear_error() -> None:
    from hpctrain.slurm.parsers_json import parse_sacct_json, parse_squeue_json

    with pytest.raises(SlurmError, match="squeue --json printed something that is not JSON"):
        parse_squeue_json("squeue: error: plugin not found\n", 0)
    with pytest.raises(SlurmError, match="HPCTRAIN_SLURM_JSON=0"):
        parse_sacct_json('{"errors": []}')

"""The SLURM output parsers and the state map, on output recorded from the dev cluster."""

from __future__ import annotations

import pytest

from hpctrain.errors import SlurmError
from hpctrain.slurm import parsers as p
from hpctrain.slurm.states import TERMINAL, JobState, parse_state

from .helpers import recorded_jobs, recording

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


def test_squeue_recorded_mixed_states() -> None:
    rows = p.parse_squeue(recording("squeue_mixed").stdout)
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
    # COMPLETED means exit 0 by definition; other ends need sacct for the code.
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    failed = rows[J["failed"]]
    assert failed.state is JobState.FAILED and failed.exit_code is None and failed.reason is None
    assert rows[J["cancelled"]].state is JobState.CANCELLED
    assert all(r.source == "squeue" for r in rows.values())


def test_squeue_recorded_after_purge() -> None:
    rows = p.parse_squeue(recording("squeue_after").stdout)
    # MinJobAge=30 on the dev cluster: only the jobs that ended in the last 30 s remain.
    assert rows[J["timeout"]].state is JobState.TIMEOUT
    assert rows[J["timeout"]].elapsed_s == 61
    assert J["completed"] not in rows


def test_sacct_recorded_mixed_states() -> None:
    rows = p.parse_sacct(recording("sacct_mixed").stdout)
    assert set(rows) == set(J.values())
    failed = rows[J["failed"]]
    assert failed.state is JobState.FAILED and (failed.exit_code, failed.signal) == (3, 0)
    cancelled = rows[J["cancelled"]]
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.slurm_state.startswith("CANCELLED by")
    assert cancelled.node_list is None  # "None assigned"
    assert rows[J["dependency"]].reason == "Dependency"
    assert rows[J["dependency"]].exit_code is None
    assert rows[J["running2"]].state is JobState.RUNNING
    assert rows[J["running2"]].node_list == "node[1-2]"
    assert rows[J["completed"]].exit_code == 0
    assert all(r.source == "sacct" for r in rows.values())


def test_sacct_recorded_final_states() -> None:
    rows = p.parse_sacct(recording("sacct_after").stdout)
    assert rows[J["timeout"]].state is JobState.TIMEOUT
    assert rows[J["timeout"]].elapsed_s == 61 and rows[J["timeout"]].time_limit_s == 60
    assert rows[J["running2"]].state is JobState.COMPLETED
    # A job that ended carries no pending reason even if sacct keeps the old one.
    assert rows[J["dependency"]].reason is None
    assert all(r.state.is_terminal for r in rows.values())


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
    assert fields["Command"].endswith("job.sh 25")
    dep = p.parse_scontrol_job(recording("scontrol_dependency").stdout)
    assert dep is not None and dep.state is JobState.PENDING and dep.reason == "Dependency"
    assert dep.node_list is None
    done = p.parse_scontrol_job(recording("scontrol_completed").stdout)
    assert done is not None and done.state is JobState.COMPLETED and done.exit_code == 0
    assert p.parse_scontrol_job(recording("scontrol_unknown").stdout) is None


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

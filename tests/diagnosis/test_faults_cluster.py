"""The fault matrix of a user's own multi-rank script on the dev cluster (issue 51): a torch DDP
program that imports nothing from hpctrain (examples/faults/ddp_faults.py), 2 nodes x 2 ranks
over gloo, one fault a job. The raise is named at the rank's own line; each hang is ended within
its window and `why` names the rank, its node, its frame and the collective with its number;
the mismatch is the code's error; the correct run completes; no node is held against.

Every row's job is queued at once (the cluster runs one 2-node job at a time), then read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from hpctrain.values import rundir
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "faults" / "ddp_faults.py"
WINDOW = 10  # --stall-window: the shortest the plan accepts
# The flight recorder of gloo's collectives (torch 2.13's CPU build; Debian's torch 2.6 in the
# 24.11 lane has none): the collective's number is named where it records them, the stacks
# name the rank either way.
FLIGHT = hasattr(torch._C._distributed_c10d, "_dump_fr_trace_json")
# row -> the fault's arguments: rank 3 is node2's second rank, rank 1 node1's.
ROWS = {
    "raise": ("--fault", "raise", "--rank", "3", "--at", "2"),
    "sleep": ("--fault", "sleep", "--rank", "1", "--at", "3", "--steps", "30"),
    "skip": ("--fault", "skip", "--rank", "2", "--at", "3", "--steps", "12"),
    "sigstop": ("--fault", "sigstop", "--rank", "2", "--at", "3", "--steps", "30"),
    "loader": ("--fault", "loader", "--rank", "1", "--at", "3", "--steps", "30"),
    "mismatch": ("--fault", "mismatch", "--rank", "2", "--at", "3", "--steps", "30"),
    # Every rank computes without a word for over three windows: not a stall.
    "busy": ("--fault", "busy", "--at", "2", "--steps", "5", "--busy-s", str(3 * WINDOW + 8)),
    "correct-1": ("--steps", "6"),
    "correct-2": ("--steps", "6"),
    "correct-3": ("--steps", "6"),
}


def _rows_of(test_name: str) -> list[str]:
    """The rows a test of this module reads (the correct runs by their parameter)."""
    if "[" in test_name:
        return [test_name.split("[", 1)[1].rstrip("]")]
    if test_name.startswith("test_no_row_holds"):
        return list(ROWS)
    return [row for row, words in ROW_TESTS.items() if words in test_name]


# row -> the words of the test that reads it.
ROW_TESTS = {"raise": "raises", "sleep": "asleep", "skip": "skips", "sigstop": "stopped_rank",
             "loader": "data_loader", "mismatch": "mismatched", "busy": "compute_silently"}


@pytest.fixture(scope="module")
def jobs(devcluster: DevClusterHandle, tmp_path_factory: pytest.TempPathFactory,
         request: pytest.FixtureRequest) -> tuple[Cli, dict[str, dict[str, Any]]]:
    """The jobs of the rows the selected tests read, queued at once (the 24.11 lane selects
    the first rows alone)."""
    cli = Cli(devcluster, tmp_path_factory.mktemp("faults"))
    shutil.copy(PROGRAM, cli.cwd / "train.py")
    here = request.node.nodeid.split("::")[0]
    wanted = {row for item in request.session.items if item.nodeid.startswith(here + "::")
              for row in _rows_of(item.name)}
    queued = {row: cli.submit("--nodes", "2", "--gpus-per-node", "2", "--time", "3",
                              "--stall-window", str(WINDOW), "--job-name", row, "--",
                              "python", "train.py", *args)
              for row, args in ROWS.items() if row in wanted}
    return cli, queued


def _ended(jobs: tuple[Cli, dict[str, dict[str, Any]]], row: str) -> tuple[Cli, dict[str, Any],
                                                                          dict[str, Any]]:
    cli, queued = jobs
    job = queued[row]
    ended = cli.wait(str(job["job_id"]), lambda j: j["terminal"], 600)
    why: dict[str, Any] = json.loads(cli.ok("why", str(job["job_id"]), "--json").stdout)
    return cli, ended, why


def _hang(jobs: tuple[Cli, dict[str, dict[str, Any]]], row: str) -> str:
    """The row's job was ended by the watcher within its window (plus the 90 s the issue
    allows for start-up, the look and the cancel); its `why` summary."""
    _, ended, why = _ended(jobs, row)
    assert ended["state"] == "CANCELLED" and ended["verdict"] == "stalled", (ended, why)
    assert ended["elapsed_s"] < WINDOW + 90, ended
    assert why["cause"] == "stalled", why
    return str(why["summary"])


def test_a_rank_that_raises_is_the_cause_at_its_own_line(jobs: Any) -> None:
    _, ended, why = _ended(jobs, "raise")
    assert ended["state"] == "FAILED"
    assert why["cause"] == "exception", why
    assert why["summary"].startswith("rank 3 on node2 raised RuntimeError: simulated bug on "
                                     "rank 3 in "), why["summary"]
    assert "train.py:" in why["summary"] and "(train_step)" in why["summary"]
    # The peers' own errors, where they printed one before srun ended them, are named its
    # consequences (whether they print one is a race with srun's kill: the recorded cases in
    # tests/diagnosis/test_multirank.py hold the words).
    err = Path(jobs[1]["raise"]["stderr"]).read_text()
    if "Connection closed by peer" in err:
        assert "consequences, not causes" in why["summary"], why["summary"]
    assert "MASTER_ADDR" not in why["fix"]
    assert ended["verdict"].startswith("rank 3: RuntimeError: simulated bug")


def test_a_rank_asleep_in_its_own_function_is_named_with_the_collective(jobs: Any) -> None:
    summary = _hang(jobs, "sleep")
    if FLIGHT:
        assert "rank 1 on node1 never entered all_reduce #4 (its last: all_reduce #3)" \
            in summary
        assert "ranks 0, 2, 3 waited in it" in summary
        assert "rank 1 was in wait_for_the_others (train.py:" in summary
    else:
        assert "rank 1 on node1 never entered a collective; it was in wait_for_the_others " \
            "(train.py:" in summary, summary


def test_a_rank_that_skips_a_collective_is_named(jobs: Any) -> None:
    summary = _hang(jobs, "skip")
    if FLIGHT:
        assert "rank 2 on node2 never entered all_reduce #12 (its last: all_reduce #11)" \
            in summary
        assert "it ran fewer collectives than they did" in summary
    else:
        assert "rank 2 on node2 never entered a collective" in summary, summary


def test_a_stopped_rank_is_named(jobs: Any) -> None:
    summary = _hang(jobs, "sigstop")
    assert "rank 2 on node2 was stopped" in summary
    assert "ranks 0, 1, 3 waited in all_reduce #4" in summary


def test_a_rank_stuck_in_its_data_loader_is_named(jobs: Any) -> None:
    summary = _hang(jobs, "loader")
    assert "rank 1 on node1 never entered all_reduce #4 (its last: all_reduce #3)" in summary
    assert "rank 1 was in main (train.py:" in summary
    assert "waiting for its data loader's worker, which was in Slow.__getitem__ (train.py:" \
        in summary


def test_a_mismatched_collective_is_the_codes_error(jobs: Any) -> None:
    _, ended, why = _ended(jobs, "mismatch")
    # Ended by the watcher once the ranks hung on it, and named the code's error, not a stall.
    assert ended["state"] == "CANCELLED" and ended["elapsed_s"] < WINDOW + 90, ended
    assert why["cause"] == "collective_mismatch", why
    assert ended["verdict"] == "mismatched collective", ended
    summary = str(why["summary"])
    assert summary.startswith("an error in the program's code, on which the job hung"), summary
    assert "mismatched collective all_reduce #4" in summary
    assert "rank 2 gave all_reduce [[3]] Float" in summary
    assert "an error in the program's code" in summary


def test_ranks_that_compute_silently_for_three_windows_are_not_stalled(jobs: Any) -> None:
    _, ended, why = _ended(jobs, "busy")
    assert ended["state"] == "COMPLETED", (ended, why)
    looks = rundir.RunDir(jobs[1]["busy"]["run_dir"]).stall_looks
    verdicts = [json.loads(line)["verdict"] for line in looks.read_text().splitlines()]
    assert verdicts and not any(v["stalled"] for v in verdicts), verdicts
    # Computing while silent; a look as the silence ends may find the collectives going on.
    assert all(v["kind"] in ("busy", "running") for v in verdicts), verdicts
    assert any("computing, not stalled" in v["text"] for v in verdicts), verdicts


@pytest.mark.parametrize("row", ["correct-1", "correct-2", "correct-3"])
def test_a_correct_run_completes(jobs: Any, row: str) -> None:
    cli, ended, why = _ended(jobs, row)
    assert ended["state"] == "COMPLETED", (ended, why)
    out = Path(jobs[1][row]["stdout"]).read_text()
    assert "final_loss" in out
    err = Path(jobs[1][row]["stderr"]).read_text()
    assert "terminate called" not in err


def test_no_row_holds_a_node_against(jobs: Any) -> None:
    for row in jobs[1]:
        _ended(jobs, row)
    cli = jobs[0]
    listed = json.loads(cli.ok("nodes", "--json").stdout)
    assert listed["nodes"] == [] and listed["watched"] == [], listed

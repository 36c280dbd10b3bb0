"""Bad nodes remembered (issue 41): which node a failure points at, the quarantine and its
expiry, and `hpctrain nodes`. On the dev cluster: tests/jobs/test_badnodes_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hpctrain.diagnosis import badnodes
from hpctrain.diagnosis.model import Diagnosis, Evidence
from hpctrain.history import History, NodeSuspect
from hpctrain.slurm.accounting import Accounting, summary_row
from hpctrain.slurm.hostlist import expand_nodes
from hpctrain.slurm.states import JobState

RECORDED = Path(__file__).resolve().parents[1] / "diagnosis" / "recorded" / "py-spy-0.4.3"
FAULTHANDLER = RECORDED.parent / "faulthandler-3.11"


def _ended(state: JobState, nodes: str) -> Evidence:
    row = summary_row("41", state, state.value, exit_code=0, signal=None, elapsed_s=60,
                      time_limit_s=600, node_list=nodes)
    return Evidence("41", Accounting((row,)))


def test_node_lists_expand_as_slurm_writes_them() -> None:
    assert expand_nodes("node[1-3,05],gpu7,a[08-10]") == [
        "node1", "node2", "node3", "node05", "gpu7", "a08", "a09", "a10"]
    assert expand_nodes(None) == []


def test_a_node_failure_points_at_the_node_slurm_calls_down() -> None:
    ev = _ended(JobState.NODE_FAIL, "node[1-2]")
    found = badnodes.suspects(Diagnosis("node_failure", "", ""), ev, "dev",
                              {"node1": "idle", "node2": "down*"})
    assert [(s.node, s.reason, s.job_id) for s in found] == [("node2", "node_failure", "41")]
    # Both nodes back and idle: nothing says which one failed.
    assert badnodes.suspects(Diagnosis("node_failure", "", ""), ev, "dev",
                             {"node1": "idle", "node2": "idle"}) == []


def _stall(recorded: Path, hung: str | None = None) -> Evidence:
    """A recorded stall of two ranks, rank 0 on node2 in all_reduce and rank 1 on node1 (the
    issue's case); `hung` replaces rank 1's stack."""
    report = json.loads((recorded / "stall.json").read_text())
    ranks = report["nodes"][0]["ranks"]
    ranks[0]["node"], ranks[1]["node"] = "node2", "node1"
    report["nodes"] = [{**report["nodes"][0], "node": r["node"], "ranks": [r]} for r in ranks]
    texts = {p.name: p.read_text() for p in recorded.glob("*.txt")}
    if hung is not None:
        texts[ranks[1]["stack"]] = hung
    return Evidence("41", None, stall=report, stall_stacks=texts)


def test_a_stall_in_the_users_own_code_blames_no_node() -> None:
    """Issue 51: rank 1 slept in the user's load_next_shard before an all_reduce; a rank's
    own deadlock lands on one node every time, so it is no evidence against the node."""
    for recorded in (RECORDED, FAULTHANDLER):
        ev = _stall(recorded)
        assert badnodes.suspects(Diagnosis("stalled", "", ""), ev, "dev", {}) == [], recorded


# Rank 1 of the same program, stopped inside a library instead: py-spy's short paths (a
# DataLoader waiting for its worker: the standard library's wait under torch's frames) and
# faulthandler's full ones (CUDA's synchronize under the user's loss.item()).
PY_SPY_IN_TORCH = """Process 914: /usr/bin/python3 /work/train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 914 (idle): "MainThread"
    wait (threading.py:331)
    get (queue.py:180)
    _try_get_data (torch/utils/data/dataloader.py:1133)
    _next_data (torch/utils/data/dataloader.py:1332)
    __next__ (torch/utils/data/dataloader.py:631)
    main (train.py:36)
    <module> (train.py:44)

Thread 930 (idle): "Thread-1 (_pin_memory_loop)"
    wait (threading.py:331)
    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:52)
    run (threading.py:982)
"""
FAULTHANDLER_IN_CUDA = """Thread 0x00007fbbe1fff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007fbbfe231b80 (most recent call first):
  File "/v/lib/python3.11/site-packages/torch/cuda/__init__.py", line 985 in synchronize
  File "/work/train.py", line 27 in load_next_shard
  File "/work/train.py", line 36 in main
  File "/work/train.py", line 44 in <module>
"""
# The user's own queue: the standard library's frames count as their caller's.
PY_SPY_USERS_QUEUE = PY_SPY_IN_TORCH.replace(
    "    _try_get_data (torch/utils/data/dataloader.py:1133)\n"
    "    _next_data (torch/utils/data/dataloader.py:1332)\n"
    "    __next__ (torch/utils/data/dataloader.py:631)\n", "    next_batch (train.py:20)\n")


def test_a_stall_in_library_code_makes_the_node_a_suspect() -> None:
    for recorded, hung, frame in ((RECORDED, PY_SPY_IN_TORCH, "_try_get_data"),
                                  (FAULTHANDLER, FAULTHANDLER_IN_CUDA, "synchronize")):
        found = badnodes.suspects(Diagnosis("stalled", "", ""), _stall(recorded, hung), "dev",
                                  {})
        assert [(s.node, s.reason) for s in found] == [("node1", "stall")]
        assert "rank 1 on node1 never entered a collective" in found[0].evidence
        assert f"rank 1 sat in library code: {frame} (" in found[0].evidence


def test_a_users_own_wait_in_the_standard_library_is_the_users_code() -> None:
    ev = _stall(RECORDED, PY_SPY_USERS_QUEUE)
    assert badnodes.suspects(Diagnosis("stalled", "", ""), ev, "dev", {}) == []
    # No stack could be read for the stuck rank: no evidence either way, no suspect.
    report = dict(_stall(RECORDED).stall or {})
    bare = Evidence("41", None, stall=report, stall_stacks={})
    assert badnodes.suspects(Diagnosis("stalled", "", ""), bare, "dev", {}) == []


def test_a_run_slurm_requeued_after_a_node_failure_still_names_the_node() -> None:
    """The job completed in its second run; its first ended NODE_FAIL on node2."""
    first = summary_row("41", JobState.NODE_FAIL, "NODE_FAIL", exit_code=0, signal=None,
                        elapsed_s=30, time_limit_s=600, node_list="node[1-2]")
    second = summary_row("41", JobState.COMPLETED, "COMPLETED", exit_code=0, signal=None,
                         elapsed_s=60, time_limit_s=600, node_list="node[1,3]")
    ev = Evidence("41", Accounting((first, second)))
    done = Diagnosis("completed", "", "")
    assert badnodes.needs_node_states(done, ev)
    found = badnodes.suspects(done, ev, "dev", {"node2": "down", "node1": "mixed"})
    assert [(s.node, s.reason) for s in found] == [("node2", "node_failure")]


def test_a_gpu_fault_on_one_node_makes_it_a_suspect() -> None:
    from hpctrain.diagnosis.logscan import scan

    text = ("h9:77:78 [0] misc.cc:1 NCCL WARN Cuda failure 999 'unknown error'\n"
            "srun: error: h9: task 1: Exited with exit code 1\n")
    ev = Evidence("41", None, findings=tuple(scan(text, "x.log")))
    found = badnodes.suspects(Diagnosis("gpu_fault", "", ""), ev, "dev", {})
    assert [(s.node, s.reason) for s in found] == [("h9", "gpu_fault")]
    assert "CUDA unknown error on h9" in found[0].evidence
    # Two nodes' ranks show it: no one node is to blame.
    both = text + "h8:70:71 [0] misc.cc:1 NCCL WARN Cuda failure 999 'unknown error'\n"
    ev2 = Evidence("41", None, findings=tuple(scan(both, "x.log")))
    assert badnodes.suspects(Diagnosis("gpu_fault", "", ""), ev2, "dev", {}) == []


def test_a_users_exception_points_at_no_node() -> None:
    ev = _ended(JobState.FAILED, "node1")
    assert badnodes.suspects(Diagnosis("exception", "", ""), ev, "dev", {"node1": "down"}) == []


def test_the_quarantine_expires(tmp_path: Path) -> None:
    history = History(tmp_path / "h.db")
    now = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
    old = (now - timedelta(hours=30)).isoformat(timespec="seconds")
    new = (now - timedelta(hours=1)).isoformat(timespec="seconds")
    history.add_suspects([
        NodeSuspect(cluster="dev", node="node1", reason="node_failure", evidence="e",
                    job_id="1", at=old),
        NodeSuspect(cluster="dev", node="node2", reason="gpu_fault", evidence="e", job_id="2",
                    at=new),
        NodeSuspect(cluster="dev", node="node2", reason="gpu_fault", evidence="e", job_id="2",
                    at=new),  # the same evidence twice is kept once
    ])
    held = badnodes.quarantined(history.suspects("dev"), now, 24)
    assert [(q.node, q.jobs) for q in held] == [("node2", ("2",))]
    assert [q.node for q in badnodes.quarantined(history.suspects(), now, 48)] == [
        "node1", "node2"]
    assert history.clear_suspects("dev", ["node2"]) == 1
    assert badnodes.quarantined(history.suspects("dev"), now, 24) == []
    assert badnodes.quarantine_hours("0") == 0 and badnodes.quarantine_hours("x") == 24


def _stalled(node: str, job: str, hours_ago: float = 1, reason: str = "stall") -> NodeSuspect:
    at = datetime(2026, 11, 27, 12, tzinfo=timezone.utc) - timedelta(hours=hours_ago)
    return NodeSuspect(cluster="dev", node=node, reason=reason, evidence="e", job_id=job,
                       at=at.isoformat(timespec="seconds"))


def test_a_stall_alone_quarantines_only_once_two_programs_stalled_there() -> None:
    now = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
    programs = {("dev", "1"): "train.py", ("dev", "2"): "train.py", ("dev", "3"): "-m other"}

    def judged(*found: NodeSuspect) -> tuple[list[str], list[str]]:
        return ([q.node for q in badnodes.quarantined(found, now, 24, programs)],
                [q.node for q in badnodes.watched(found, now, 24, programs)])

    assert judged(_stalled("node1", "1")) == ([], ["node1"])
    # The same program stalled there twice (a chain's segments, a rerun): its own, maybe.
    assert judged(_stalled("node1", "1"), _stalled("node1", "2")) == ([], ["node1"])
    assert judged(_stalled("node1", "1"), _stalled("node1", "3")) == (["node1"], [])
    # Commands unknown to the history: two jobs are two programs, as far as is known.
    assert [q.node for q in badnodes.quarantined(
        [_stalled("node1", "1"), _stalled("node1", "9")], now, 24)] == ["node1"]
    # Node evidence quarantines at once, whatever stalled beside it.
    assert judged(_stalled("node1", "1"), _stalled("node1", "2", reason="node_failure")) == (
        ["node1"], [])
    # An expired stall counts no more.
    assert judged(_stalled("node1", "3", hours_ago=30), _stalled("node1", "1")) == (
        [], ["node1"])
    watched = badnodes.watched([_stalled("node1", "1")], now, 24)[0]
    assert watched.as_dict()["quarantined"] is False


def test_the_programs_are_read_only_where_they_decide() -> None:
    assert badnodes.stall_jobs([_stalled("node1", "1")]) == []
    assert badnodes.stall_jobs([_stalled("node1", "1"), _stalled("node1", "2"),
                                _stalled("node2", "3")]) == ["1", "2"]
    assert badnodes.stall_jobs([_stalled("node1", "1"), _stalled("node1", "2"),
                                _stalled("node1", "4", reason="gpu_fault")]) == []
    assert badnodes.program_of(["python", "train.py", "--lr", "0.1"]) == "train.py"
    assert badnodes.program_of(["python", "-u", "-m", "pkg.train", "x"]) == "-m pkg.train"
    assert badnodes.program_of(["./a.out", "7"]) == "./a.out"


def test_nodes_command_lists_and_clears(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "HPCTRAIN_HOME": str(home)}
    History(home / "state" / "history.sqlite3").add_suspects([NodeSuspect(
        cluster="dev", node="node-3", reason="node_failure", evidence="e", job_id="9")])

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hpctrain", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    listed = json.loads(run("nodes", "--json").stdout)
    assert [(n["node"], n["jobs"]) for n in listed["nodes"]] == [("node-3", ["9"])]
    assert "node-3" in run("nodes").stdout
    assert json.loads(run("nodes", "--cluster", "other", "--json").stdout)["nodes"] == []
    assert json.loads(run("nodes", "--clear", "node-3", "--json").stdout) == {"cleared": 1}
    assert "no node is quarantined" in run("nodes").stdout
    History(home / "state" / "history.sqlite3").add_suspects([NodeSuspect(
        cluster="dev", node="node-4", reason="stall", evidence="e", job_id="10")])
    # One stall is watched, not quarantined: listed, and no submit leaves the node out.
    listed = json.loads(run("nodes", "--json").stdout)
    assert listed["nodes"] == [] and [n["node"] for n in listed["watched"]] == ["node-4"]
    shown = run("nodes").stdout
    assert "no node is quarantined" in shown and "watched, not quarantined" in shown
    assert json.loads(run("nodes", "--clear-all", "--json").stdout) == {"cleared": 1}


def test_each_partitions_nodes_as_sinfo_lists_them() -> None:
    from hpctrain.slurm.parsers import parse_sinfo_partition_nodes

    text = (Path(__file__).parent / "recorded" / "slurm-22.05" / "sinfo_partition_nodes.txt"
            ).read_text()
    assert parse_sinfo_partition_nodes(text) == {"debug": ["node1", "node2"]}


def _plan_with(quarantined: tuple[str, ...], nodes: int, **kw: object):  # type: ignore[no-untyped-def]
    from hpctrain.plan import JobRequest, build_plan
    from hpctrain.profiles import load_profile

    req = JobRequest(profile=load_profile("local"), nodes=nodes, gpus_per_node=1,
                     quarantined=quarantined, partition_nodes={"debug": ("node1", "node2")},
                     **kw)  # type: ignore[arg-type]
    return build_plan(req)


def test_quarantined_nodes_are_excluded_and_said_so() -> None:
    plan = _plan_with(("node2", "elsewhere"), 1)
    assert plan.exclude == ("node2",)
    assert any("excluding quarantined node(s) node2" in n for n in plan.notes)
    from hpctrain.render.script import render_script

    assert "#SBATCH --exclude=node2\n" in render_script(plan, environ={})


def test_a_job_that_needs_every_node_says_why_it_ignores_the_quarantine() -> None:
    plan = _plan_with(("node2",), 2)
    assert plan.exclude == ()
    assert any("not excluded: the job needs 2 of partition debug's 2 node(s)" in n
               for n in plan.notes)


def test_ignore_quarantine_leaves_the_nodes_in() -> None:
    plan = _plan_with(("node2",), 1, ignore_quarantine=True)
    assert plan.exclude == () and not any("quarantine" in n for n in plan.notes)


class _Client:
    """A SLURM client that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def partition_nodes(self) -> dict[str, list[str]]:
        self.calls.append("partition_nodes")
        return {"debug": ["node1", "node2"]}


class _Place:
    """A place whose SLURM is _Client."""

    def __init__(self) -> None:
        self.client = _Client()

    def slurm_client(self) -> _Client:
        return self.client

    def cluster(self, client: _Client, recorded: str) -> str:
        client.calls.append("cluster")
        return "dev"


def test_the_submit_asks_slurm_for_the_partitions_nodes_only_for_retries(
        tmp_path: Path) -> None:
    """Without --retries and with nothing quarantined a submit asks SLURM nothing more; with
    --retries, one call (each partition's nodes) for the plan's retry rule."""
    from hpctrain.plan import JobRequest
    from hpctrain.profiles import load_profile
    from hpctrain.submission.quarantine import with_quarantine

    history = History(tmp_path / "h.db")
    history.add_suspects([_stalled("node2", "1", hours_ago=0)])  # watched only
    req = JobRequest(profile=load_profile("local"), nodes=2)
    place = _Place()
    assert with_quarantine(req, place, history) is req  # type: ignore[arg-type]
    assert place.client.calls == []
    asked = with_quarantine(replace(req, retries=1), place, history)  # type: ignore[arg-type]
    assert asked.partition_nodes == {"debug": ["node1", "node2"]} and not asked.quarantined
    assert place.client.calls == ["partition_nodes"]
    # A profile that counts its partitions' nodes answers without SLURM.
    gilbreth = replace(req, profile=load_profile("gilbreth"), retries=1)
    assert with_quarantine(gilbreth, place, history) is gilbreth  # type: ignore[arg-type]
    assert place.client.calls == ["partition_nodes"]

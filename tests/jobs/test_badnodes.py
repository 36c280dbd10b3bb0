"""Bad nodes remembered (issue 41): which node a failure points at, the quarantine and its
expiry, and `hpctrain nodes`. On the dev cluster: tests/jobs/test_badnodes_cluster.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hpctrain.diagnosis import badnodes
from hpctrain.diagnosis.model import Diagnosis, Evidence
from hpctrain.history import History, NodeSuspect
from hpctrain.slurm.accounting import Accounting, summary_row
from hpctrain.slurm.hostlist import expand_nodes
from hpctrain.slurm.states import JobState

RECORDED = Path(__file__).resolve().parents[1] / "diagnosis" / "recorded" / "py-spy-0.4.3"


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


def test_a_stall_points_at_the_node_of_the_rank_outside_the_collective() -> None:
    report = json.loads((RECORDED / "stall.json").read_text())
    texts = {p.name: p.read_text() for p in RECORDED.glob("*.txt")}
    ev = Evidence("41", None, stall=report, stall_stacks=texts)
    found = badnodes.suspects(Diagnosis("stalled", "", ""), ev, "dev", {})
    assert [(s.node, s.reason) for s in found] == [("nodeA", "stall")]
    assert "rank 1 on nodeA never entered a collective" in found[0].evidence


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
        NodeSuspect(cluster="dev", node="node2", reason="stall", evidence="e", job_id="2",
                    at=new),
        NodeSuspect(cluster="dev", node="node2", reason="stall", evidence="e", job_id="2",
                    at=new),  # the same evidence twice is kept once
    ])
    held = badnodes.quarantined(history.suspects("dev"), now, 24)
    assert [(q.node, q.jobs) for q in held] == [("node2", ("2",))]
    assert [q.node for q in badnodes.quarantined(history.suspects(), now, 48)] == [
        "node1", "node2"]
    assert history.clear_suspects("dev", ["node2"]) == 1
    assert badnodes.quarantined(history.suspects("dev"), now, 24) == []
    assert badnodes.quarantine_hours("0") == 0 and badnodes.quarantine_hours("x") == 24


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
    from hpctrain.render import render_script

    assert "#SBATCH --exclude=node2\n" in render_script(plan, environ={})


def test_a_job_that_needs_every_node_says_why_it_ignores_the_quarantine() -> None:
    plan = _plan_with(("node2",), 2)
    assert plan.exclude == ()
    assert any("not excluded: the job needs 2 of partition debug's 2 node(s)" in n
               for n in plan.notes)


def test_ignore_quarantine_leaves_the_nodes_in() -> None:
    plan = _plan_with(("node2",), 1, ignore_quarantine=True)
    assert plan.exclude == () and not any("quarantine" in n for n in plan.notes)

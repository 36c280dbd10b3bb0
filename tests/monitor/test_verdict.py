"""The stall verdict (issue 51): silence is a stall only on evidence that the ranks wait. The
flight records are those the rank hook wrote for 4 gloo ranks of torch 2.13
(recorded/flight-recorder-torch-2.13), the stacks py-spy 0.4.3's of 2 hung ranks
(tests/diagnosis/recorded/py-spy-0.4.3); the rows are what the watcher reads of /proc."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpctrain.monitor import collectives, stacks, verdict
from hpctrain.monitor.collectives import CollectiveView

FLIGHT = Path(__file__).resolve().parent / "recorded" / "flight-recorder-torch-2.13"
PY_SPY = Path(__file__).resolve().parents[1] / "diagnosis" / "recorded" / "py-spy-0.4.3"
BEHIND_TEXT = ("rank 1 on node1 never entered all_reduce #3 (its last: all_reduce #2); "
               "ranks 0, 2, 3 waited in it")


def _flight(case: str) -> tuple[CollectiveView, dict[int, str], dict[int, Any]]:
    records, nodes = {}, {}
    for path in sorted((FLIGHT / case).glob("*.json")):
        row = json.loads(path.read_text())
        records[row["rank"]], nodes[row["rank"]] = row["trace"], row["node"]
    return collectives.read(records, registered=sorted(records)), nodes, records


def _rows(nodes: Mapping[int, str], cpu: float, state: str = "S",
          **by_rank: float) -> list[dict[str, Any]]:
    """The watcher's rows: every rank at `cpu` (a core's share over the silence), but those
    named `rank<N>=share`."""
    return [{"rank": r, "node": n, "cpu": by_rank.get(f"rank{r}", cpu), "state": state}
            for r, n in sorted(nodes.items())]


def test_a_mismatch_wins_whatever_the_cpu() -> None:
    view, nodes, _ = _flight("mismatch")
    for cpu in (0.0, 0.9):
        got = verdict.judge(_rows(nodes, cpu), view, [])
        assert (got.stalled, got.kind, got.rank, got.node) == (True, "mismatch", 1, "node1")
        assert got.text.startswith("mismatched collective all_reduce #3: ")
        assert "rank 1 gave all_reduce [[3]] Float" in got.text


def test_a_stopped_rank_is_a_stall() -> None:
    view, nodes, _ = _flight("behind")
    rows = _rows(nodes, 0.0)
    rows[1]["state"] = "T"
    got = verdict.judge(rows, view, [])
    assert (got.stalled, got.kind, got.rank, got.node) == (True, "stopped", 1, "node1")
    assert got.text == ("rank 1 on node1 was stopped (a SIGSTOP or a debugger: /proc says T); "
                        + BEHIND_TEXT)
    assert got.as_dict()["kind"] == "stopped"


def test_a_rank_behind_using_no_cpu_is_a_stall() -> None:
    view, nodes, _ = _flight("behind")
    # The ranks inside the collective may spin (NCCL does); the one behind sleeps.
    got = verdict.judge(_rows(nodes, 0.9, rank1=0.01), view, [])
    assert (got.stalled, got.kind, got.rank, got.node) == (True, "behind", 1, "node1")
    assert got.text == BEHIND_TEXT


def test_a_rank_behind_that_computes_is_not_stalled() -> None:
    view, nodes, _ = _flight("behind")
    got = verdict.judge(_rows(nodes, 0.0, rank1=0.9), view, [])
    assert (got.stalled, got.kind, got.rank) == (False, "busy", None)
    assert "rank 1 90%" in got.text and got.text.endswith("computing, not stalled")


def test_every_rank_idle_is_a_stall() -> None:
    _, nodes, _ = _flight("behind")
    got = verdict.judge(_rows(nodes, 0.01), CollectiveView(), [])
    assert (got.stalled, got.kind) == (True, "idle")
    assert got.text == ("no rank used the CPU while the job was silent (rank 0 1%, rank 1 1%, "
                        "rank 2 1%, rank 3 1%): every rank waits")


def test_busy_ranks_whose_collectives_agree_are_computing() -> None:
    _, nodes, records = _flight("behind")
    records[1] = records[0]  # rank 1 as far as the others: every rank in all_reduce #3
    view = collectives.read(records, registered=sorted(records))
    got = verdict.judge(_rows(nodes, 0.9), view, [])
    assert (got.stalled, got.kind) == (False, "busy")
    assert got.text.endswith("; their collectives agree: computing, not stalled")
    # The same records with every rank idle: they all wait in it.
    idle = verdict.judge(_rows(nodes, 0.0), view, [])
    assert (idle.stalled, idle.kind) == (True, "idle")
    assert idle.text.endswith("; every rank's last collective is all_reduce #3")


def test_no_evidence_is_not_a_stall() -> None:
    got = verdict.judge([{"rank": 0, "node": "n"}, {"rank": 1, "node": "n"}], CollectiveView(),
                        [])
    assert (got.stalled, got.kind) == (False, "unknown")


def _stacks(hung_too: bool = False) -> list[stacks.RankStack]:
    report = json.loads((PY_SPY / "stall.json").read_text())
    texts = {p.name: p.read_text() for p in PY_SPY.glob("*.txt")}
    if hung_too:  # rank 1's stack replaced by rank 0's: both wait in all_reduce
        texts["nodeA-1.txt"] = texts["nodeA-0.txt"]
    return stacks.ranks_of(report["nodes"], texts)


def test_every_stack_in_a_collective_is_a_stall() -> None:
    ranks = _stacks(hung_too=True)
    rows = [{"rank": r.rank, "node": r.node, "cpu": 0.5, "state": "S"} for r in ranks]
    got = verdict.judge(rows, CollectiveView(), ranks)
    assert (got.stalled, got.kind) == (True, "all_in_collective")
    assert got.text == ("every rank waited in a collective (ranks 0, 1 waited in all_reduce): "
                        "the collective itself hung")


def test_a_stack_outside_the_collective_alone_is_no_stall() -> None:
    """The recorded stacks as they are: rank 1 in its own code, using the CPU as far as the
    rows say, so the stacks do not decide."""
    ranks = _stacks()
    rows = [{"rank": r.rank, "node": r.node, "cpu": 0.5, "state": "S"} for r in ranks]
    got = verdict.judge(rows, CollectiveView(), ranks)
    assert (got.stalled, got.kind) == (False, "busy")


def test_a_rank_in_a_collective_is_in_its_users_frame() -> None:
    rank0 = _stacks()[0]
    assert rank0.collective == "all_reduce"
    assert rank0.frame is not None and str(rank0.frame) == "main (hang_in_collective.py:37)"

"""The stall watcher on real processes: two gloo ranks, the last hung in its own code while
the other waits in all_reduce; the watcher collects both stacks and `why`'s reading of them
names the hung rank, its node and its frame (issue 41). The same on the dev cluster:
tests/monitor/test_stall_cluster.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpctrain import progress
from hpctrain.monitor import evidence, ranks, silence, stacks, stall
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir

pytest.importorskip("torch")
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "stall" / "hang_in_collective.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hung(tmp_path: Path) -> Iterator[Path]:
    """Two ranks on "nodeA": rank 1 sleeps at step 3, rank 0 waits in all_reduce.

    Yielded once rank 1 is in its sleep (its hang marker written): checking from the ranks'
    first reports instead named rank 1's sleep between steps whenever a loaded machine took
    longer than the 2 s window to bring the ranks to step 3."""
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "RANK": str(rank), "WORLD_SIZE": "2", "HPCTRAIN_RUN_DIR": str(tmp_path),
               "SLURMD_NODENAME": "nodeA", "HANG_AT": "3", "HANG_ONCE": "1",
               "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(PROGRAM)], env=env))
    try:
        deadline = time.monotonic() + 120
        while len(ranks.read_progress(tmp_path, 0)) < 2 or not (tmp_path / "hangs").exists():
            assert time.monotonic() < deadline, "the ranks never reported"
            assert all(p.poll() is None for p in procs), "a rank exited"
            time.sleep(0.2)
        time.sleep(1.0)  # rank 0: the rest of its 0.2 s pause, then into all_reduce
        yield tmp_path
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _watch(run_dir: Path, acted: list[str]) -> stall.StallWatch:
    return stall.StallWatch(run_dir, "nodeA", leader=True, nodes=1, override=2.0,
                            action="cancel", act=lambda a, _: acted.append(a), started=0.0, gpus=4)


def _ranks(run_dir: Path) -> list[stacks.RankStack]:
    report = json.loads(RunDir(run_dir).stall_report.read_text())
    folder = RunDir(run_dir).stall_dir
    return [stacks.read_rank(row, (folder / row["stack"]).read_text() if row["stack"] else None)
            for view in report["nodes"] for row in view["ranks"]]


def _check_until_stalled(watch: stall.StallWatch) -> None:
    deadline = time.monotonic() + 60
    while not watch.check(time.time()):
        assert time.monotonic() < deadline, "no stall seen"
        time.sleep(0.5)


@pytest.mark.parametrize("method", ["py-spy", "faulthandler"])
def test_the_hung_rank_is_named_with_its_frame(hung: Path, method: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if method == "py-spy" and evidence.dump_with_py_spy(os.getpid()) is None:
        pytest.skip("py-spy cannot attach here")
    if method == "faulthandler":
        monkeypatch.setattr(evidence, "_py_spy", lambda: None)
    acted: list[str] = []
    _check_until_stalled(_watch(hung, acted))
    assert acted == ["cancel"]
    report = json.loads(RunDir(hung).stall_report.read_text())
    assert report["gpus"] == 4 and report["window_s"] == 2.0
    assert {r["method"] for r in report["nodes"][0]["ranks"]} == {method}
    text = stacks.describe(_ranks(hung))
    assert text.startswith("rank 1 on nodeA never entered a collective; it was in "
                           "load_next_shard (hang_in_collective.py:"), text
    assert text.endswith("rank 0 waited in all_reduce"), text


def test_no_stall_while_the_ranks_progress(tmp_path: Path) -> None:
    reporter = progress.Reporter(RunDir(tmp_path).progress_dir, "nodeA", 0)
    acted: list[str] = []
    watch = _watch(tmp_path, acted)
    now = time.time()
    assert not watch.check(now)  # nobody has reported yet: a first step may take long
    reporter.report(1, now=now)
    assert not watch.check(now + 1.5)
    reporter.report(2, now=now + 1.5)
    assert not watch.check(now + 3.0)
    assert acted == [] and not RunDir(tmp_path).stall_report.exists()


def test_an_earlier_segments_records_are_stale(tmp_path: Path) -> None:
    """A requeued job's new monitor ignores what ranks reported before it started."""
    progress.Reporter(RunDir(tmp_path).progress_dir, "nodeA", 0).report(7, now=100.0)
    assert ranks.read_progress(tmp_path, since=99.0)[0].step == 7
    assert ranks.read_progress(tmp_path, since=101.0) == []


def test_the_window_follows_the_step_time() -> None:
    def rank(step_s: float | None) -> ranks.RankProgress:
        return ranks.RankProgress("n", 0, 1, 5, 0.0, step_s)

    assert ranks.window_s([rank(None)], None) == silence.FLOOR_S
    assert ranks.window_s([rank(0.5), rank(30.0)], None) == 20 * 30.0
    assert ranks.window_s([rank(600.0)], None) == silence.CEILING_S
    assert ranks.window_s([rank(600.0)], 45.0) == 45.0
    assert stall.parse_window("off") == (False, None)
    assert stall.parse_window("90") == (True, 90.0)
    assert stall.parse_window("") == (True, None)


def test_the_reporter_writes_once_a_second_with_the_step_time(tmp_path: Path) -> None:
    folder = RunDir(tmp_path).progress_dir
    r = progress.Reporter(folder, "node/1 x", 3)
    r.report(0, now=10.0)
    r.report(1, now=10.5)  # within the second: not written
    row = json.loads((folder / "node_1_x-3.json").read_text())
    assert (row["step"], row["t"], row["rank"]) == (0, 10.0, 3)
    r.report(2, now=11.0)
    row = json.loads((folder / "node_1_x-3.json").read_text())
    assert (row["step"], row["step_s"]) == (2, 0.5)


def test_report_outside_a_job_writes_nothing(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCTRAIN_RUN_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress, "_reporter", None)
    monkeypatch.setattr(progress, "_disabled", False)
    progress.report(1)
    assert list(tmp_path.iterdir()) == []


RECORDED = Path(__file__).resolve().parents[1] / "diagnosis" / "recorded"


@pytest.mark.parametrize("dump", ["py-spy-0.4.3", "faulthandler-3.11"])
def test_why_names_the_rank_node_and_frame_from_recorded_stacks(dump: str) -> None:
    """`why`'s rule on what the watcher kept: a cancelled job that stalled is a stall, with
    the hung rank's frame, the time it saved and the stacks as evidence."""
    from hpctrain.diagnosis.causes import diagnose
    from hpctrain.diagnosis.model import Evidence
    from hpctrain.slurm.accounting import Accounting, summary_row
    from hpctrain.slurm.states import JobState

    folder = RECORDED / dump
    report = json.loads((folder / "stall.json").read_text())
    texts = {p.name: p.read_text() for p in folder.glob("*.txt")}
    row = summary_row("77", JobState.CANCELLED, "CANCELLED by 0", exit_code=0, signal=None,
                      elapsed_s=300, time_limit_s=3900, node_list="nodeA")
    d = diagnose(Evidence("77", Accounting((row,)), stall=report, stall_stacks=texts))
    assert d.cause == "stalled" and d.headline == "stalled"
    assert ("rank 1 on nodeA never entered a collective; it was in load_next_shard "
            "(hang_in_collective.py:27); rank 0 waited in all_reduce") in d.summary
    assert "hpctrain ended it, 01:00:00 before its time limit, 4.0 GPU-hours" in d.summary
    assert d.fix.startswith("look at rank 1's code at load_next_shard")
    assert d.evidence[1] == f"{rundir.STALL_DIR}/nodeA-1.txt: rank 1 on nodeA, last reported step 0"

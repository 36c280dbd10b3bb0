"""`why` on multi-rank failures (issue 51): the raising rank's own error is the cause and its
peers' lost connections its consequences, on jobs recorded on the dev cluster
(recorded/multirank-slurm-22.05: examples/faults/ddp_faults.py as train.py, --fault raise);
gloo's teardown race and argparse's refusal of the command line, each on a real job's
accounting."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.logscan import Finding, scan
from hpctrain.diagnosis.model import Evidence
from hpctrain.slurm import accounting
from hpctrain.slurm.runner import Result
from hpctrain.slurm.states import JobState
from tests.recorded import check_replay

RECORDED = Path(__file__).resolve().parent / "recorded" / "multirank-slurm-22.05"
FAULTS = Path(__file__).resolve().parents[2] / "examples" / "faults" / "ddp_faults.py"


def _sacct(case: Path) -> accounting.Accounting:
    data = json.loads((case / "sacct.json").read_text())
    recorded = Result(tuple(data["argv"]), data["returncode"], data["stdout"], data["stderr"])
    check_replay(accounting.argv("1"), recorded)  # the command the client asks, ids aside
    return accounting.parse_accounting(data["stdout"])


def _findings(case: Path) -> tuple[Finding, ...]:
    return tuple(f for name in ("stdout.log", "stderr.log")
                 for f in scan((case / name).read_text(), name))


def _evidence(case: Path) -> Evidence:
    return Evidence(job_id="1", accounting=_sacct(case), findings=_findings(case))


@pytest.mark.parametrize(("case", "rank", "node", "peers"), [
    ("rank_raised", "3", "node2", "rank 2"),
    ("rank_raised_one_node", "1", "node1", "rank 0"),
])
def test_the_raising_rank_is_the_cause(case: str, rank: str, node: str, peers: str) -> None:
    got = diagnose(_evidence(RECORDED / case))
    assert got.cause == "exception" and got.certain, got
    assert got.summary.startswith(f"rank {rank} on {node} raised RuntimeError: simulated bug "
                                  f"on rank {rank} in /tmp/own/hpctrain-runs/"), got.summary
    assert "/code/train.py:56 (train_step)" in got.summary
    assert got.summary.endswith(f"; {peers} then lost its peer or timed out (\"Connection "
                                "closed by peer\", a collective's timeout): consequences, not "
                                "causes"), got.summary
    assert got.headline == f"rank {rank}: RuntimeError: simulated bug on rank {rank}"
    assert got.evidence[0] == f"stderr.log:9 (rank {rank}): RuntimeError: simulated bug on rank " \
        f"{rank}"
    assert f"srun: error: {node}: task {rank}: Exited with exit code 1" in got.evidence[1]


def test_the_peers_error_is_read_as_a_lost_peer() -> None:
    found = {f.kind: f for f in _findings(RECORDED / "rank_raised")}
    peer = found["collective_timeout"]
    assert peer.rank == "2" and peer.info.get("peer_gone") == "1"
    assert found["exception"].rank == "3"
    frame = found["exception"].user_frame()
    assert frame is not None and (frame.line, frame.func) == (56, "train_step")


def _failed() -> accounting.Accounting:
    acct = _sacct(RECORDED / "rank_raised")
    assert acct.last is not None and acct.last.state is JobState.FAILED
    return acct


TEARDOWN = ("terminate called without an active exception\n"
            "srun: error: node2: task 3: Aborted (core dumped)\n")


def test_gloo_teardown_race() -> None:
    findings = tuple(scan(TEARDOWN, "hpctrain-1.err"))
    assert [f.kind for f in findings] == ["teardown_abort", "task_signal"]
    got = diagnose(Evidence("1", _failed(), findings=findings))
    assert got.cause == "teardown_race" and got.headline == "gloo's teardown race"
    assert "not your code's error" in got.summary
    assert got.evidence[0] == "hpctrain-1.err:1: terminate called without an active exception"


def test_a_rank_that_raised_beats_the_teardown_race() -> None:
    case = RECORDED / "rank_raised"
    text = (case / "stderr.log").read_text() + TEARDOWN
    got = diagnose(Evidence("1", _failed(), findings=tuple(scan(text, "stderr.log"))))
    assert got.cause == "exception" and got.summary.startswith("rank 3 on node2 raised")


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> str:
    """argparse's own words, from the fault script run as the recorded jobs ran it (as
    train.py), with a sweep's value where a flag belongs."""
    train = tmp_path_factory.mktemp("code") / "train.py"
    shutil.copy(FAULTS, train)
    run = subprocess.run([sys.executable, str(train), "lr=0.1"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    return run.stderr


def test_argparse_refusing_the_command_line(refused: str) -> None:
    findings = tuple(scan(refused, "hpctrain-1.err"))
    usage = [f for f in findings if f.kind == "usage_error"]
    assert len(usage) == 1 and usage[0].text == "train.py: error: unrecognized arguments: lr=0.1"
    assert usage[0].info == {"prog": "train.py", "message": "unrecognized arguments: lr=0.1"}
    got = diagnose(Evidence("1", _failed(), findings=findings))
    assert got.cause == "usage_error" and got.headline == "command line refused"
    assert got.summary == "train.py refused its command line: unrecognized arguments: lr=0.1"
    assert "`--lr {lr}`" in got.fix


def test_a_completed_job_is_completed_whatever_its_log_says(refused: str) -> None:
    """Such lines in a job that completed (a subprocess's, a retried tool's) are not its
    end: the accounting of a recorded completed job says so."""
    acct = _sacct(RECORDED.parent / "slurm-24.11" / "completed")
    assert acct.last is not None and acct.last.state is JobState.COMPLETED
    findings = tuple(scan(refused + TEARDOWN, "hpctrain-1.err"))
    assert {"usage_error", "teardown_abort"} <= {f.kind for f in findings}
    assert diagnose(Evidence("1", acct, findings=findings)).cause == "completed"

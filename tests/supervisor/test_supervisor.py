"""The in-job supervisor (`--restarts`) with real processes: what it restarts and what not.

The launch step is a small Python program here (the dev cluster's srun runs in
tests/supervisor/test_restarts_cluster.py); srun's lines are parsed from a real job's error
file (SLURM 22.05, a SIGKILLed rank of a 2x2 job).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hpctrain.supervisor import ports
from hpctrain.supervisor.loop import (
    END,
    NEXT_PORT,
    RESTART,
    Ended,
    Supervisor,
    cause_of,
    decide,
    rank_failures,
)
from hpctrain.values.attempts import parse_attempts, restarts_spent
from hpctrain.values.rundir import RunDir

RECORDED = Path(__file__).parent / "recorded"


def test_srun_lines_name_the_task_that_died_first() -> None:
    text = (RECORDED / "slurm-22.05-rank-killed.err").read_text()
    failures = rank_failures(text)
    assert failures[0] == "task 3 on node2: Killed" and len(failures) == 4
    cause = cause_of(Ended(143), failures)
    assert cause.startswith("task 3 on node2: Killed, then srun ended 3 other task(s)")


@pytest.mark.parametrize(("ended", "stopped", "ending", "left", "then"), [
    (Ended(0), False, False, 2, END),           # done
    (Ended(1), False, False, 2, RESTART),       # a rank's error
    (Ended(137), False, False, 0, END),         # spent
    (Ended(1), True, False, 2, END),            # the safe stop: the batch script requeues
    (Ended(143), False, True, 2, END),          # SLURM ends the job
    (Ended(130, {"verdict": {}}), False, False, 1, RESTART),  # the stall watch asked
])
def test_only_a_failure_or_a_stall_with_a_restart_left_starts_again(
        ended: Ended, stopped: bool, ending: bool, left: int, then: str) -> None:
    assert decide(ended, stopped, ending, left) == then


def _supervisor(tmp_path: Path, program: str, restarts: int) -> Supervisor:
    return Supervisor([sys.executable, "-c", program], RunDir(tmp_path), restarts, "7", 0,
                      None, True)


# Fails until its third start: each start leaves a mark in the run directory.
FLAKY = """
import os, sys
marks = os.path.join({d!r}, "starts")
with open(marks, "a") as f:
    f.write(os.environ["HPCTRAIN_ATTEMPT"] + " " + os.environ.get("MASTER_PORT", "") + "\\n")
sys.exit(0 if len(open(marks).readlines()) >= 3 else 3)
"""


def test_a_failed_step_starts_again_with_a_fresh_port_until_it_ends_well(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_PORT", "20100")
    sup = _supervisor(tmp_path, FLAKY.format(d=str(tmp_path)), restarts=2)
    assert sup.run() == 0
    starts = [line.split() for line in (tmp_path / "starts").read_text().splitlines()]
    assert [s[0] for s in starts] == ["0", "1", "2"]
    assert len({s[1] for s in starts}) == 3 and starts[0][1] == "20100"
    records = parse_attempts(RunDir(tmp_path).attempts.read_text())
    assert [(a.attempt, a.rc, a.then) for a in records] == [
        (0, 3, RESTART), (1, 3, RESTART), (2, 0, END)]
    assert records[0].cause == "the step ended with exit 3" and restarts_spent(records) == 2


def test_restarts_spent_end_with_the_step_status(tmp_path: Path) -> None:
    sup = _supervisor(tmp_path, FLAKY.format(d=str(tmp_path)), restarts=1)
    assert sup.run() == 3
    assert [a.then for a in parse_attempts(RunDir(tmp_path).attempts.read_text())] == [
        RESTART, END]


def test_a_safe_stop_is_not_restarted(tmp_path: Path) -> None:
    saved = RunDir(tmp_path).stop_saved
    program = f"open({str(saved)!r}, 'w').close(); raise SystemExit(75)"
    assert _supervisor(tmp_path, program, restarts=2).run() == 75
    assert len(parse_attempts(RunDir(tmp_path).attempts.read_text())) == 1


def test_the_stall_watch_request_stops_the_step_and_starts_it_again(tmp_path: Path) -> None:
    # The first start hangs (as a stalled collective does) until the request comes.
    program = ("import os, time\nif os.environ['HPCTRAIN_ATTEMPT'] == '0': time.sleep(600)\n")
    sup = _supervisor(tmp_path, program, restarts=1)
    request = {"verdict": {"kind": "hung", "summary": "rank 1 never entered all_reduce #5"},
               "suspect_node": "node2"}

    def ask() -> None:
        time.sleep(1.0)
        RunDir(tmp_path).restart_request.write_text(json.dumps(request))

    threading.Thread(target=ask, daemon=True).start()
    started = time.monotonic()
    assert sup.run() == 0
    assert time.monotonic() - started < 20
    first, second = parse_attempts(RunDir(tmp_path).attempts.read_text())
    assert first.then == RESTART and first.suspect_node == "node2"
    assert first.cause == "stall: rank 1 never entered all_reduce #5 (suspect node node2)"
    assert second.then == END and not RunDir(tmp_path).restart_request.exists()


def test_sigterm_from_slurm_ends_the_job_without_a_restart(tmp_path: Path) -> None:
    (tmp_path / "go.py").write_text(
        "import sys\nfrom hpctrain.supervisor.__main__ import main\nsys.exit(main())\n")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "go.py"), "--restarts", "3",
                             "--run-dir", str(tmp_path), "--", sys.executable, "-c",
                             "import time; time.sleep(600)"],
                            env=dict(os.environ, PYTHONPATH=str(Path.cwd())))
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    records = parse_attempts(RunDir(tmp_path).attempts.read_text())
    assert [a.then for a in records] == [END]


def test_the_next_port_skips_one_that_is_held() -> None:
    port = next(p for p in range(25000, 26000) if ports.bindable(p) and ports.bindable(p + 1))
    with socket.socket() as held:
        held.bind(("", port))
        assert ports.next_port(port - 1, here=True) == port + 1
        # Another node's ports cannot be tried from here: the next one is given.
        assert ports.next_port(port - 1, here=False) == port
    assert ports.next_port(31999, here=False) == 20000


def test_a_node_that_does_not_answer_holds_the_job_for_slurm_to_end(tmp_path: Path) -> None:
    """The probe fails (a dead node): no restart is spent; SLURM's end (SIGTERM) ends the wait."""
    sup = _supervisor(tmp_path, "raise SystemExit(1)", restarts=2)
    sup.probe = [sys.executable, "-c", "raise SystemExit(1)"]

    def slurm_ends_the_job() -> None:
        time.sleep(1.5)
        sup.ending = True

    threading.Thread(target=slurm_ends_the_job, daemon=True).start()
    assert sup.run() == 1
    records = parse_attempts(RunDir(tmp_path).attempts.read_text())
    assert [a.then for a in records] == [END]


# The store's bind fails as torch says it (a real job's error, SLURM 22.05, torch 2.13), the
# first two times: another program took the port between its choice and the bind.
TAKEN = """
import os, sys
marks = os.path.join({d!r}, "starts")
with open(marks, "a") as f:
    f.write(os.environ["MASTER_PORT"] + "\\n")
if len(open(marks).readlines()) < 3:
    print("torch.distributed.DistNetworkError: The server socket has failed to listen on any "
          "local network address. port: 20172, useIpv6: false, code: -98, name: EADDRINUSE, "
          "message: address already in use", file=sys.stderr)
    sys.exit(1)
"""


def test_a_taken_port_starts_the_step_on_the_next_one_without_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_PORT", "20172")
    err = tmp_path / "job.err"
    err.touch()
    # The job's error file, as SLURM's --error makes it: the step's stderr appended there.
    sup = Supervisor(["sh", "-c", 'exec "$@" 2>>"$0"', str(err), sys.executable, "-c",
                      TAKEN.format(d=str(tmp_path))], RunDir(tmp_path), 0, "7", 0, err, True)
    assert sup.run() == 0
    ports = (tmp_path / "starts").read_text().split()
    assert len(ports) == 3 and len(set(ports)) == 3 and ports[0] == "20172"
    records = parse_attempts(RunDir(tmp_path).attempts.read_text())
    assert [a.then for a in records] == [NEXT_PORT, NEXT_PORT, END]
    assert records[0].cause.startswith("the rendezvous port was taken") and not restarts_spent(
        records)

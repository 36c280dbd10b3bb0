"""The supervisor's loop: the launch step run, and run again inside the allocation.

It runs in the batch script, on the job's first node, around the launch line (srun ...). When
the step ends badly (a rank killed, a rank's error: srun's --kill-on-bad-exit has ended the
others) or the stall watch asks (RESTART_REQUEST), every rank is stopped and the step starts
again on the same nodes with a fresh rendezvous port, from the run's last checkpoint, until the
restarts are spent. A safe stop (the time limit's warning), SLURM ending the job, and a clean
exit are never restarted. Each attempt is one line of attempts.jsonl (values/attempts.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from hpctrain.supervisor.ports import next_port
from hpctrain.values.attempts import END, NEXT_PORT, RESTART, Attempt
from hpctrain.values.outputs import output_files
from hpctrain.values.rundir import RunDir
from hpctrain.values.srunlines import SRUN_TASK

POLL_S = 0.2
# srun ends a step on a second SIGINT within a second (SIGKILL to every task); past this, the
# supervisor kills srun itself.
STOP_WAIT_S = 30.0
# srun's line for each task that ended badly: "srun: error: node2: task 3: Killed".
_TAIL_BYTES = 256 * 1024
# Before a restart every node must run a task (a step of `true`), within this time.
PROBE_STEP = "hpctrain-probe"
PROBE_TIMEOUT_S = 30.0
HOLD_S = 30.0
# How often a taken rendezvous port starts the step again on the next one.
PORT_TRIES = 3
_PORT_TAKEN = re.compile(r"EADDRINUSE|[Aa]ddress already in use")


@dataclass(frozen=True)
class Ended:
    """How one attempt's step ended: its exit status, the stall request that stopped it."""

    rc: int
    request: dict[str, Any] | None = None


def rank_failures(text: str) -> list[str]:
    """srun's lines about tasks that ended badly, as 'task 3 on node2: Killed'."""
    found = []
    for line in text.splitlines():
        m = SRUN_TASK.search(line.strip())
        if m:
            found.append(f"task {m['task']} on {m['node']}: {m['what'].strip()}")
    return list(dict.fromkeys(found))


def port_taken(text: str) -> bool:
    """True when the step's errors say its rendezvous port was in use (the store's bind)."""
    return bool(_PORT_TAKEN.search(text))


def cause_of(ended: Ended, failures: Sequence[str], taken: bool = False) -> str:
    """Why the attempt ended, in words for `status` and `why`."""
    if taken and ended.request is None and ended.rc:
        return "the rendezvous port was taken by another program (EADDRINUSE)"
    if ended.request is not None:
        verdict = ended.request.get("verdict") or {}
        node = ended.request.get("suspect_node")
        what = verdict.get("summary") or verdict.get("kind") or "no rank progressed"
        return f"stall: {what}" + (f" (suspect node {node})" if node else "")
    if ended.rc == 0:
        return "completed"
    status = f"exit {ended.rc}" if ended.rc < 128 else f"signal {ended.rc - 128}"
    if not failures:
        return f"the step ended with {status}"
    # srun names the task that ended first first; the others are the ones it ended for it.
    others = f", then srun ended {len(failures) - 1} other task(s)" if len(failures) > 1 else ""
    return f"{failures[0]}{others} (the step's {status})"


def decide(ended: Ended, stopped: bool, ending: bool, restarts_left: int) -> str:
    """RESTART or END: only a failure or a stall, with a restart left, starts the step again."""
    if ending or stopped or restarts_left <= 0:
        return END
    if ended.request is not None or ended.rc != 0:
        return RESTART
    return END


def exit_status(rc: int) -> int:
    """A Popen return code as the shell reports it: 128 + N for signal N."""
    return 128 - rc if rc < 0 else rc


@dataclass
class Supervisor:
    """One segment of a job: its attempts, `restarts` of them after the first at most."""

    command: list[str]
    run_dir: RunDir
    restarts: int
    job: str
    requeue: int
    stderr: Path | None
    here: bool  # on the job's first node: ports can be tried before they are given
    probe: list[str] = field(default_factory=list)  # a step on every node; [] asks none
    ending: bool = False
    child: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_environment(cls, command: list[str], run_dir: Path, restarts: int) -> Supervisor:
        env = os.environ
        errs = output_files([env.get("HPCTRAIN_STDERR", "")], env)
        node, master = env.get("SLURMD_NODENAME", ""), env.get("MASTER_ADDR", "")
        restart_count = env.get("SLURM_RESTART_COUNT", "0")
        nodes = env.get("SLURM_JOB_NUM_NODES", "1")
        probe = ["srun", "--overlap", f"--nodes={nodes}", f"--ntasks={nodes}",
                 "--ntasks-per-node=1", "--cpus-per-task=1", "--kill-on-bad-exit=1",
                 f"--job-name={PROBE_STEP}", "true"]
        return cls(command, RunDir(run_dir), restarts, env.get("SLURM_JOB_ID", ""),
                   int(restart_count) if restart_count.isdigit() else 0,
                   errs[0] if errs else None, bool(node) and node == master, probe)

    def run(self) -> int:
        """Every attempt, until one ends well or a restart is not taken; the last's status."""
        signal.signal(signal.SIGTERM, self._on_term)
        port = _int(os.environ.get("MASTER_PORT"))
        attempt = spent = taken = 0
        while True:
            started, offset = time.time(), self._stderr_size()
            ended = self._attempt(attempt, port)
            text = self._stderr_since(offset)
            then = decide(ended, self._stopped(started), self.ending, self.restarts - spent)
            # A port another program took between its choice and the store's bind is no
            # failure of the job's: the step starts again on the next one, no restart spent.
            if ended.rc and not self.ending and port_taken(text) and taken < PORT_TRIES:
                then = NEXT_PORT
            if then in (RESTART, NEXT_PORT) and not self._nodes_answer():
                then = END
            self._record(Attempt(attempt, self.job, started, time.time(), ended.rc,
                                 cause_of(ended, rank_failures(text), port_taken(text)), then,
                                 port, (ended.request or {}).get("suspect_node"), offset,
                                 self._stderr_size(), self.requeue))
            if then == END:
                return ended.rc
            attempt += 1
            spent, taken = spent + (then == RESTART), taken + (then == NEXT_PORT)
            port = next_port(port, self.here) if port else None
            self._say(f"restarting the ranks inside the job (restart {spent} of "
                      f"{self.restarts}, port {port}) from the run's last checkpoint"
                      if then == RESTART else f"starting the ranks again on port {port}")

    def _nodes_answer(self) -> bool:
        """True once every node of the job runs a task again. A node that died (its slurmd
        gone) fails the step too; restarting there would spend every restart and end the job
        FAILED before SLURM finds the node down, ends the job NODE_FAIL and requeues it
        without the node: so the supervisor waits for that, asking again every HOLD_S."""
        while not self.ending:
            if not self.probe or _run_quietly(self.probe, PROBE_TIMEOUT_S) == 0:
                return True
            self._say("a node of the job does not answer: waiting for SLURM to end the job "
                      "(NODE_FAIL) and requeue it, or for the node to answer again")
            for _ in range(int(HOLD_S / POLL_S)):
                if self.ending:
                    break
                time.sleep(POLL_S)
        return False

    def _attempt(self, attempt: int, port: int | None) -> Ended:
        env = dict(os.environ, HPCTRAIN_ATTEMPT=str(attempt))
        if port:
            env["MASTER_PORT"] = str(port)
        started = time.time()
        self.child = subprocess.Popen(self.command, env=env)
        try:
            return self._wait(self.child, started)
        finally:
            self.child = None

    def _wait(self, proc: subprocess.Popen[bytes], since: float) -> Ended:
        while True:
            try:
                return Ended(exit_status(proc.wait(timeout=POLL_S)))
            except subprocess.TimeoutExpired:
                pass
            request = self._take_request(since)
            if request is not None and not self.ending:
                self._say("the stall watch asked for a restart: stopping every rank")
                return Ended(self._stop(proc), request)

    def _stop(self, proc: subprocess.Popen[bytes]) -> int:
        """End the step: srun kills every task on a second SIGINT within a second."""
        for _ in range(2):
            _signal(proc, signal.SIGINT)
            time.sleep(0.3)
        try:
            return exit_status(proc.wait(timeout=STOP_WAIT_S))
        except subprocess.TimeoutExpired:
            proc.kill()
            return exit_status(proc.wait())

    def _take_request(self, since: float) -> dict[str, Any] | None:
        path = self.run_dir.restart_request
        try:
            if path.stat().st_mtime < since - 1:
                path.unlink()  # an earlier attempt's, never taken
                return None
            data = json.loads(path.read_text(encoding="utf-8"))
            path.unlink()
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else {}

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        # SLURM ends the job (scancel, the time limit): nothing is restarted; srun has the
        # same signal from SLURM and passes it on.
        self.ending = True
        if self.child is not None:
            _signal(self.child, signum)

    def _stopped(self, since: float) -> bool:
        """True when the trainer stopped on request in this attempt (its checkpoint saved)."""
        return any(_newer(p, since) for p in (self.run_dir.stop_saved,
                                              self.run_dir.stop_requested))

    def _record(self, attempt: Attempt) -> None:
        with self.run_dir.attempts.open("a", encoding="utf-8") as fh:
            fh.write(attempt.line())
        if attempt.then != END or attempt.attempt:
            self._say(f"attempt {attempt.attempt} of job {self.job} ended: {attempt.cause}")

    def _stderr_size(self) -> int | None:
        try:
            return self.stderr.stat().st_size if self.stderr else None
        except OSError:
            return None

    def _stderr_since(self, offset: int | None) -> str:
        if self.stderr is None or offset is None:
            return ""
        try:
            with self.stderr.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(offset, size - _TAIL_BYTES))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    @staticmethod
    def _say(text: str) -> None:
        print(f"hpctrain: {text}", file=sys.stderr, flush=True)


def _run_quietly(argv: list[str], timeout_s: float) -> int | None:
    """The command's exit status; None where it could not run or did not end in time."""
    try:
        return subprocess.run(argv, timeout=timeout_s, check=False, capture_output=True).returncode
    except (OSError, subprocess.TimeoutExpired):
        return None


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(OSError):
        proc.send_signal(signum)


def _newer(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since - 1
    except OSError:
        return False


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


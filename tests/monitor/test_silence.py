"""A silent job's clocks (issue 51): sbatch's output patterns filled as SLURM fills them, the
output's rhythm read from real files, and /proc/<pid>/stat read from real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpctrain.monitor import procs
from hpctrain.monitor.silence import CEILING_S, FLOOR_S, OutputRhythm
from hpctrain.values import outputs

ENV = {"SLURM_JOB_ID": "123", "SLURM_ARRAY_JOB_ID": "120", "SLURM_ARRAY_TASK_ID": "3",
       "SLURM_JOB_NAME": "my run"}


def test_output_patterns_are_filled_as_slurm_does() -> None:
    got = outputs.output_files(["/runs/%x-%j.out", "/runs/%A_%a.err", "/runs/100%%-%j.log",
                                "/runs/%x-%j.out", "", "/runs/%N-%u.txt", "/runs/end%"], ENV)
    assert got == (Path("/runs/my run-123.out"), Path("/runs/120_3.err"),
                   Path("/runs/100%-123.log"), Path("/runs/%N-%u.txt"), Path("/runs/end%"))
    # Outside an array: the array's fields are empty, as their variables are.
    assert outputs.output_files(["o-%A-%a-%j"], {"SLURM_JOB_ID": "9"}) == (Path("o---9"),)


def test_the_output_rhythm_of_real_files(tmp_path: Path) -> None:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    rhythm = OutputRhythm((out, err, tmp_path / "never-written.log"))
    rhythm.look(100.0)  # nothing written yet: the first look is where the silence starts
    assert rhythm.grew_at == 100.0 and rhythm.gaps == []
    assert rhythm.silent_s(130.0, since=90.0) == 30.0
    assert rhythm.window_s() == FLOOR_S
    for t in (110.0, 120.0, 130.0, 140.0):
        with out.open("a") as f:
            f.write(f"step at {t}\n")
        rhythm.look(t)
    assert rhythm.grew_at == 140.0 and rhythm.gaps == [10.0, 10.0, 10.0, 10.0]
    assert rhythm.silent_s(200.0, since=0.0) == 60.0
    assert rhythm.silent_s(200.0, since=150.0) == 50.0  # a later start counts from there
    assert rhythm.window_s() == 20 * 10.0  # STEP_FACTOR times the usual gap
    rhythm.look(160.0)  # no growth: nothing changes
    assert rhythm.grew_at == 140.0 and rhythm.gaps == [10.0, 10.0, 10.0, 10.0]
    # A write to the other file counts too; a long gap (a checkpoint) widens the window.
    err.write_text("a warning\n")
    rhythm.look(540.0)
    assert rhythm.gaps[-1] == 400.0 and rhythm.window_s() == 2 * 400.0


def test_the_window_is_clamped(tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    fast, slow = OutputRhythm((out,)), OutputRhythm((out,))
    for i, t in enumerate((0.0, 1.0, 2.0, 3.0)):
        out.write_text("x" * (i + 1))
        fast.look(t)
    assert fast.window_s() == FLOOR_S  # 20 x 1 s and 2 x 1 s are below the floor
    out.write_text("")
    for i, t in enumerate((0.0, 1000.0, 2000.0)):
        out.write_text("x" * (10 + i))
        slow.look(t)
    assert slow.gaps == [1000.0, 1000.0] and slow.window_s() == CEILING_S


def test_a_file_that_shrinks_is_not_growth(tmp_path: Path) -> None:
    """A log truncated (a rerun writing over it) grows again only past its old size."""
    out = tmp_path / "job.out"
    out.write_text("x" * 100)
    rhythm = OutputRhythm((out,))
    rhythm.look(10.0)
    out.write_text("y" * 10)
    rhythm.look(20.0)
    assert rhythm.grew_at == 10.0


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def test_parse_stat_of_this_process() -> None:
    before = procs.parse_stat(Path("/proc/self/stat").read_text(), _ticks())
    assert before.state == "R" and not before.stopped and before.cpu_s > 0
    mine = procs.read_stat(os.getpid())
    assert mine is not None and mine.cpu_s >= before.cpu_s


def test_parse_stat_of_a_command_name_with_spaces_and_parentheses() -> None:
    # The kernel's line: pid (comm) state ppid ... utime (14th) stime (15th) ...
    line = ("4242 (my ) (x) S) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 3 0 "
            "97 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 1 "
            "0 0 0 0 0\n")
    got = procs.parse_stat(line, 100.0)
    assert got == procs.ProcStat("S", 3.0)


# A process that names itself (as prctl(PR_SET_NAME) does; only a process may rename itself)
# "a) R (b) T": its stat line then reads "PID (a) R (b) T) S ...".
_RENAMED = ("import sys, time\nopen('/proc/self/comm', 'w').write(sys.argv[1])\n"
            "print('ready', flush=True)\ntime.sleep(60)\n")
ODD_NAME = "a) R (b) T"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    p = subprocess.Popen([sys.executable, "-c", _RENAMED, ODD_NAME], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        yield p
    finally:
        p.kill()
        p.wait()


def test_a_real_command_name_with_spaces_and_parentheses(child: subprocess.Popen[str]) -> None:
    text = Path(f"/proc/{child.pid}/stat").read_text()
    assert text.startswith(f"{child.pid} ({ODD_NAME}) ")
    parsed = procs.parse_stat(text, _ticks())
    # Running its last lines or asleep: read past the name's ") R (b) T)", not inside it.
    assert parsed.state in ("R", "S") and not parsed.stopped
    got = procs.read_stat(child.pid)
    assert got is not None and got.state in ("R", "S") and got.cpu_s >= parsed.cpu_s


def test_a_stopped_process_reads_as_stopped(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while (got := procs.read_stat(child.pid)) is None or not got.stopped:
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
        assert got.state == "T"
    finally:
        os.kill(child.pid, signal.SIGCONT)
    child.kill()
    child.wait()
    assert procs.read_stat(child.pid) is None  # reaped: /proc no longer shows it

"""A process killed while it writes a checkpoint leaves the one before it whole, and that one is
what a restart resumes from (issue 54). A real process, a real SIGKILL in the middle of the
write of a 400 MB checkpoint; tests/trainer/test_trainer_runs.py tears a save from inside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from hpctrain.trainer.resume import choose_checkpoint
from hpctrain.trainer.signals import clear_stale_markers
from hpctrain.values.rundir import RunDir

SAVER = """
import sys, torch
from pathlib import Path
from hpctrain.trainer.callbacks import AtomicCheckpointIO
io, path = AtomicCheckpointIO(), Path(sys.argv[1])
io.save_checkpoint({"epoch": 1}, path)
print("saved", flush=True)
io.save_checkpoint({"epoch": 2, "weights": torch.ones(100_000_000)}, path)
print("saved again", flush=True)
"""


def _writing(run: Path) -> Path | None:
    """The temporary sibling of last.ckpt once it holds part of the second checkpoint."""
    for p in run.glob(".last.ckpt.*.tmp"):
        if p.stat().st_size > 1 << 20:
            return p
    return None


def test_a_kill_during_the_save_leaves_the_last_checkpoint_whole(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(run.last_ckpt)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "saved\n"
        deadline = time.monotonic() + 60
        while (partial := _writing(run.root)) is None:
            assert proc.poll() is None, "the saver ended before its second save was seen"
            assert time.monotonic() < deadline, "the second save never started"
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    try:
        # The kill came while the new checkpoint was half written beside the old one.
        assert partial.exists()
        assert torch.load(run.last_ckpt, weights_only=False) == {"epoch": 1}
        assert choose_checkpoint("auto", run.root) == run.last_ckpt
        # The next segment's start removes the torn write, and only that.
        mine = [run.root / ".data.k2j3h4g5.tmp", run.root / "last.ckpt.notes.tmp"]
        for p in mine:
            p.write_text("the user's")
        clear_stale_markers(run.root, time.time())
        assert not partial.exists() and run.last_ckpt.is_file()
        assert all(p.read_text() == "the user's" for p in mine)
    finally:
        partial.unlink(missing_ok=True)

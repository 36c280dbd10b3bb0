"""The packaged trainer's marks on the start-up timeline: every rank of a DDP run writes its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain import rundir
from hpctrain.diagnosis import startup

from .helpers import TINY_SPIRAL, clean_env, run_module


@pytest.mark.slow
def test_each_rank_marks_its_start_up(tmp_path: Path) -> None:
    """Two local processes (Lightning starts the second): each one's marks, in order, with the
    packages its imports went to, in the --run-dir (no job's run directory is set)."""
    run = tmp_path / "run"
    done = run_module(["--task", "spiral", "--max-epochs", "1", "--run-dir", str(run),
                       "--set", "trainer.devices=2", *[f"--set={o}" for o in TINY_SPIRAL]],
                      env=clean_env({"OMP_NUM_THREADS": "1"}), timeout=300)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in (run / rundir.STARTUP_DIR).iterdir())
    assert len(files) == 2 and files[0].endswith("-0.jsonl") and files[1].endswith("-1.jsonl")
    got = startup.read(run)
    assert got is not None and [t.rank for t in got.ranks] == [0, 1] and got.batch == ()
    for track in got.ranks:
        assert [m.name for m in track.marks] == [
            "process started", "imports done", "process group formed", "data ready",
            "first step"]
        packages = [p.name for p in track.marks[1].packages]
        assert len(packages) == 3 and "torch" in packages
    # The first step is the one metrics.json times from the process start.
    metrics = json.loads((run / rundir.METRICS).read_text())
    rank0 = got.ranks[0]
    first, began = rank0.at("first step"), rank0.at("process started")
    assert first is not None and began is not None
    assert first - began == pytest.approx(metrics["startup_s"], abs=0.1)

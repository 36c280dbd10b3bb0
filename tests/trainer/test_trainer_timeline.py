"""The packaged trainer's marks on the start-up timeline: every rank of a DDP run writes its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.diagnosis import startup
from hpctrain.values.rundir import RunDir

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
    files = sorted(p.name for p in RunDir(run).startup_dir.iterdir())
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
    metrics = json.loads(RunDir(run).metrics.read_text())
    rank0 = got.ranks[0]
    first, began = rank0.at("first step"), rank0.at("process started")
    assert first is not None and began is not None
    assert first - began == pytest.approx(metrics["startup_s"], abs=0.1)


@pytest.mark.slow
def test_torch_and_lightning_import_without_the_cycle_search(tmp_path: Path) -> None:
    """No cycle search between the start of the heavy imports and `imports done`; what they
    made is frozen after, and the search is on again for training (issue 43: 2.65 -> 1.85 s)."""
    probe = f"""
import gc, json, sys
from hpctrain import timeline
from hpctrain.trainer import entry, lean
runs = []
gc.callbacks.append(lambda phase, info: phase == "start" and runs.append(1))
seen = {{}}
real_install, real_done = lean.install, timeline.imports_done
def install(*a, **k):
    seen["before"] = len(runs)
    return real_install(*a, **k)
def done(*a, **k):
    seen.update(during=len(runs) - seen["before"], on=gc.isenabled(), frozen=gc.get_freeze_count())
    return real_done(*a, **k)
lean.install, timeline.imports_done = install, done
run_dir = {str(tmp_path / "run")!r}
sys.argv = ["trainer", "--task", "spiral", "--max-epochs", "1", "--run-dir", run_dir,
            *{[f"--set={o}" for o in TINY_SPIRAL]!r}]
code = entry.main()
seen["after"] = len(runs) - seen["before"]
print(json.dumps(seen))
sys.exit(code)
"""
    done = subprocess.run([sys.executable, "-c", probe], env=clean_env({"OMP_NUM_THREADS": "1"}),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["during"] == 0 and seen["on"] is True and seen["frozen"] > 50_000, seen
    assert seen["after"] > 0  # training allocates: the search runs again

"""The packaged trainer under a per-node launch: one process imports torch and Lightning, then
forks the node's workers, which train real Lightning DDP (gloo) together (issue 43)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctrain import timeline
from hpctrain.diagnosis import startup
from hpctrain.trainconfig.options import TrainerCall
from hpctrain.trainer import entry, lean, workers
from hpctrain.values.rundir import RunDir

from .helpers import TINY_SPIRAL, clean_env

pytestmark = pytest.mark.slow


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _node(run: Path, *args: str) -> subprocess.Popen[str]:
    """The trainer as a per-node launch starts it on the only node of two workers."""
    env = clean_env({"NODE_RANK": "0", "NNODES": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port(),
                     "OMP_NUM_THREADS": "1", "HPCTRAIN_RUN_DIR": str(run)})
    return subprocess.Popen(
        [sys.executable, "-m", "hpctrain.trainer", "--task", "spiral",
         *[f"--set={o}" for o in TINY_SPIRAL], *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_one_import_then_two_workers_train_together(tmp_path: Path) -> None:
    run = tmp_path / "run"
    node = _node(run, "--max-epochs", "2")
    out, err = node.communicate(timeout=300)
    assert node.returncode == 0, err
    assert "world_size=2 nodes=1 devices_per_node=2" in out and "launch=per-node" in out
    got = startup.read(run)
    assert got is not None and [t.rank for t in got.ranks] == [0, 1]
    imported = set()
    for track in got.ranks:
        assert [m.name for m in track.marks] == [
            "process started", "imports done", "worker started", "process group formed",
            "data ready", "first step"]
        imported.add((track.at("process started"), track.at("imports done")))
    # One process started and imported for both: the workers share its marks.
    assert len(imported) == 1
    assert "fork" in [p.name for p in got.phases()]
    # metrics.json times the first step from the node trainer's start, imports included.
    metrics = json.loads(RunDir(run).metrics.read_text())
    assert metrics["launch"] == "per-node"
    rank0 = got.ranks[0]
    first, began = rank0.at("first step"), rank0.at("process started")
    assert first is not None and began is not None
    assert first - began == pytest.approx(metrics["startup_s"], abs=0.1)
    assert metrics["startup_imports_s"] > 0.5


def test_a_stop_signal_to_the_node_reaches_its_workers_which_save_and_exit_75(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    node = _node(run, "--max-epochs", "1000")
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and node.poll() is None:
            got = startup.read(run)
            if got is not None and all(t.at("first step") for t in got.ranks) and len(
                    got.ranks) == 2:
                break
            time.sleep(0.1)
        node.send_signal(signal.SIGUSR1)
        out, err = node.communicate(timeout=120)
    finally:
        node.kill()
    assert node.returncode == 75, err
    assert RunDir(run).stop_saved.exists() and (run / "last.ckpt").exists()
    assert "epoch 1000/1000" not in out


def test_where_cuda_has_started_the_workers_are_new_trainer_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback a GPU node takes where a fork would find CUDA started: each worker is a new
    `python -m hpctrain.trainer` with the node trainer's resolved settings (config_args)."""
    run = tmp_path / "run"
    for key, value in clean_env({
            "NODE_RANK": "0", "NNODES": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port(), "OMP_NUM_THREADS": "1",
            "HPCTRAIN_RUN_DIR": str(run)}).items():
        monkeypatch.setenv(key, value)
    for key in ("RANK", "LOCAL_RANK", "GROUP_RANK"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(workers, "cuda_started", lambda: "torch has initialised CUDA")
    # This process is the node's trainer: its import hooks and marks must not outlive the test.
    monkeypatch.setattr(lean, "install", lambda *args: False)
    monkeypatch.setattr(timeline, "_timeline", timeline._Timeline())
    monkeypatch.setattr(timeline, "_clock", None)
    call = entry.build_parser().parse_args(
        ["--task", "spiral", "--max-epochs", "2", *[f"--set={o}" for o in TINY_SPIRAL]])
    assert entry.run(TrainerCall.from_values(vars(call))) == 0
    metrics = json.loads(RunDir(run).metrics.read_text())
    assert metrics["status"] == "completed" and len(metrics["epochs"]) == 2
    assert metrics["settings"]["data"]["samples"] == 4096  # the settings reached the workers
    assert metrics["world_size"] == 2
    got = startup.read(run)
    assert got is not None and sorted(t.rank for t in got.ranks) == [0, 1]
    # Each worker imported for itself: no "worker started" (no fork).
    for track in got.ranks:
        names = [m.name for m in track.marks]
        assert "worker started" not in names and names[-1] == "first step"

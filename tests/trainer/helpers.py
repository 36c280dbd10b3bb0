"""Helpers for the trainer tests: a clean launch environment and running the trainer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import hpctrain

HERE = Path(__file__).resolve().parent
SRC = Path(hpctrain.__file__).resolve().parents[1]

# Variables that would make the trainer think it runs under a launcher (when pytest itself runs
# inside a SLURM job or torchrun) or point it at a user's run directory or secrets.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
               "HPCTRAIN_NODE_WORKER")
OTHER_VARS = ("HPCTRAIN_RUN_DIR", "HPCTRAIN_DATA_DIR", "HPCTRAIN_DATA_URL", "COMET_API_KEY")

# Small enough to train in about a second, large enough to learn the spirals.
TINY_SPIRAL = ["data.samples=4096", "trainer.batch_size=256", "optim.lr=0.01"]
# Tests that stop or save at a given batch: one batch per training_step call, as Lightning counts.
ONE_BATCH_PER_CALL = "trainer.batches_per_call=1"

# The built-in tasks' epoch line.
EPOCH_LINE = re.compile(
    r"^epoch (\d+)/(\d+) train_loss=(\S+) val_loss=(\S+) val_acc=(\S+) samples/s=(\S+)", re.M
)
# Any task's: the metrics the module logs, by name, between the epoch and samples/s.
ANY_EPOCH_LINE = re.compile(r"^epoch (\d+)/\d+ (.*?) ?samples/s=(\S+) time=\S+s$", re.M)


def epochs_in(output: str) -> list[int]:
    """The epoch numbers of the per-epoch lines in the trainer's output."""
    return [int(m.group(1)) for m in ANY_EPOCH_LINE.finditer(output)]


def epoch_line_metrics(output: str) -> list[dict[str, str]]:
    """Per epoch line, the name=value pairs before samples/s (values as printed)."""
    lines = ANY_EPOCH_LINE.finditer(output)
    return [dict(pair.split("=", 1) for pair in m.group(2).split()) for m in lines]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """os.environ without launcher variables, with hpctrain and the test package importable."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "TORCHELASTIC_", "PMI_", "OMPI_"))
        and k not in LAUNCH_VARS + OTHER_VARS + ("MASTER_ADDR", "MASTER_PORT")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra or {})
    return env


def run_module(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m hpctrain.trainer ARGS` in a clean environment."""
    return subprocess.run(
        [sys.executable, "-m", "hpctrain.trainer", *args],
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )

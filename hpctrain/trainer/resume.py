"""Which checkpoint a run continues from (--resume auto|never|PATH), checked before training."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hpctrain.errors import ConfigError
from hpctrain.values.rundir import RunDir

# Lightning's SLURM requeue handler saves hpc_ckpt_<n>.ckpt in the run directory.
_HPC = re.compile(r"^hpc_ckpt_(\d+)\.ckpt$")


def requeue_checkpoints(run_dir: Path) -> list[Path]:
    """The requeue checkpoints Lightning left in the run directory."""
    if not run_dir.is_dir():
        return []
    return [p for p in run_dir.iterdir() if _HPC.match(p.name) and p.is_file()]


def choose_checkpoint(mode: str, run_dir: Path) -> Path | None:
    """The checkpoint to resume from: the newest in the run dir (auto), none, or a given path."""
    if mode == "never":
        stale = requeue_checkpoints(run_dir)
        if stale:
            # Lightning itself resumes from these when no checkpoint is given under SLURM.
            raise ConfigError(
                f"--resume never, but {run_dir} holds requeue checkpoints "
                f"({', '.join(sorted(p.name for p in stale))}) that Lightning would resume from",
                "use a fresh --run-dir, or delete those files",
            )
        return None
    if mode == "auto":
        candidates = [RunDir(run_dir).last_ckpt, *requeue_checkpoints(run_dir)]
        existing = [p for p in candidates if p.is_file()]
        return max(existing, key=lambda p: p.stat().st_mtime_ns) if existing else None
    path = Path(mode).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"--resume {mode}: no such checkpoint file",
            "give the path of a .ckpt file, or --resume auto / never",
        )
    return path.absolute()


def _unreadable(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"checkpoint {path} cannot be used: {reason}",
        "hpctrain will not silently start from zero: delete the file (or the run directory) "
        "to start over, or pass --resume never with a fresh --run-dir",
    )


def validate_checkpoint(path: Path, module: nn.Module, task: str) -> dict[str, Any]:
    """Load the checkpoint once and check it fits this task and model; returns its header."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _unreadable(path, f"it is corrupt or not a checkpoint ({first})") from e
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise _unreadable(path, "it has no model state_dict")
    for key in ("epoch", "global_step", "loops", "optimizer_states"):
        if key not in checkpoint:
            raise _unreadable(path, f"it lacks {key!r} (a weights-only file cannot resume a run)")
    saved_task = checkpoint.get("callbacks", {}).get("hpctrain.RunRecorder", {}).get("task")
    if saved_task is not None and saved_task != task:
        raise _unreadable(path, f"it was written by task {saved_task!r}, this run is {task!r}")
    expected = module.state_dict()
    saved = checkpoint["state_dict"]
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    mismatched = [
        f"{k} {tuple(saved[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in saved and isinstance(saved[k], torch.Tensor) and saved[k].shape != v.shape
    ]
    problems = []
    if missing:
        problems.append(f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
    if unexpected:
        more = " ..." if len(unexpected) > 3 else ""
        problems.append(f"unexpected {', '.join(unexpected[:3])}{more}")
    if mismatched:
        more = " ..." if len(mismatched) > 3 else ""
        problems.append(f"shape {'; '.join(mismatched[:3])}{more} (checkpoint vs model)")
    if problems:
        raise _unreadable(path, "it does not match this model: " + "; ".join(problems))
    # Lightning counts an epoch as processed once its last batch ran; a requeue checkpoint taken
    # mid-epoch has not processed the epoch it was saved in.
    fit_loop = (
        checkpoint["loops"].get("fit_loop", {}) if isinstance(checkpoint["loops"], dict) else {}
    )
    progress = fit_loop.get("epoch_progress", {}).get("current", {})
    finished = int(progress.get("processed", int(checkpoint["epoch"]) + 1))
    return {
        "epoch": int(checkpoint["epoch"]),
        "epochs_finished": finished,
        "mid_epoch": finished <= int(checkpoint["epoch"]),
        "global_step": int(checkpoint["global_step"]),
        "logged_steps": logged_steps(fit_loop),
    }


def logged_steps(fit_loop: dict[str, Any]) -> int:
    """The loggers' steps a checkpoint covers: the resumed run logs from this step on.

    Loggers count training_step calls (Lightning's `_batches_that_stepped`), not optimizer steps
    (global_step). Saved at a batch's end (a mid-epoch stop) the count lacks that batch, which
    Lightning adds back when it resumes; saved at an epoch's end it is whole.
    """
    stepped = fit_loop.get("epoch_loop.state_dict", {}).get("_batches_that_stepped", 0)
    total = fit_loop.get("epoch_loop.batch_progress", {}).get("total", {})
    at_batch_end = (total.get("started") == total.get("ready") == total.get("processed")
                    and total.get("completed") == (total.get("processed") or 0) - 1)
    return int(stepped) + (1 if at_batch_end else 0)

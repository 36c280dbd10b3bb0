"""A DDP script of one's own that resumes after an in-job restart (docs/long-runs.md,
"Restarts inside the job"): what `--restarts` asks of a command that is not the packaged
trainer.

hpctrain starts the command again from its beginning; the script goes on from its own
checkpoint. Three things make that work:
1. the checkpoint lives in the run directory ($HPCTRAIN_RUN_DIR), the same for every attempt
   (and for a requeue or a chain's next segment);
2. it is written whole or not at all: a temporary file renamed over the old one, so a rank
   killed during the save leaves the previous checkpoint to read;
3. the script reads it at its start, if it is there, and continues from the step after it.

    hpctrain submit --profile local --nodes 2 --gpus-per-node 1 --restarts 1 \
        -- python examples/restarts/resumable.py --steps 300
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

try:
    from hpctrain.progress import report
except ImportError:  # without hpctrain: no stall watch, nothing else changes

    def report(step: int) -> None:
        del step


def checkpoint_path() -> Path:
    return Path(os.environ.get("HPCTRAIN_RUN_DIR", ".")) / "resumable.pt"


def save(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    path = checkpoint_path()
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)  # whole or not at all


def load(model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """The first step still to run: 0, or the one after the checkpoint's."""
    path = checkpoint_path()
    if not path.exists():
        return 0
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return int(state["step"]) + 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--step-s", type=float, default=0.05)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    first = load(model, opt)
    attempt = os.environ.get("HPCTRAIN_ATTEMPT", "0")
    if rank == 0:
        print(f"attempt {attempt}: starting at step {first}", flush=True)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(rank))
    for step in range(first, args.steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        for param in model.parameters():
            assert param.grad is not None
            dist.all_reduce(param.grad)
        opt.step()
        report(step)
        if rank == 0 and (step + 1) % args.save_every == 0:
            save(model, opt, step)
        time.sleep(args.step_s)
    if rank == 0:
        print(f"done: {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

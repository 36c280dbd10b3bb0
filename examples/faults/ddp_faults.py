"""A researcher's own DDP script (argparse, torch, gloo) that imports nothing from hpctrain,
with one fault a run: the rows of the fault matrix in docs/why.md and tests/diagnosis.

    python ddp_faults.py --fault raise --rank 3 --at 2

--fault: none (a correct run, ending with destroy_process_group), raise (the rank raises in
its step), sleep (the rank sleeps in its own function before a collective), skip (the rank
skips one all_reduce), sigstop (the rank stops itself with SIGSTOP), loader (the rank's data
loader worker hangs), mismatch (the rank all_reduces a tensor of another size), busy (every
rank computes for --busy-s seconds without a word: not a stall).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--fault", default="none",
                   choices=["none", "raise", "sleep", "skip", "sigstop", "loader", "mismatch",
                            "busy"])
    p.add_argument("--rank", type=int, default=1, help="the rank that misbehaves")
    p.add_argument("--at", type=int, default=3, help="the step at which it does")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--step-s", type=float, default=0.2, help="seconds of work a step")
    p.add_argument("--busy-s", type=float, default=35.0, help="--fault busy: for how long")
    return p.parse_args()


def wait_for_the_others(seconds: float) -> None:
    time.sleep(seconds)


def compute_silently(seconds: float) -> None:
    """Work the CPU without printing (a long evaluation, say)."""
    a, end = torch.rand(256, 256), time.monotonic() + seconds
    while time.monotonic() < end:
        a = torch.tanh(a @ a)


class Slow(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A data set whose item `hang_at` never comes (in the loader's worker process)."""

    def __init__(self, hang_at: int | None) -> None:
        self.hang_at = hang_at

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.hang_at:
            time.sleep(3600)
        return torch.ones(4)


def train_step(step: int, rank: int, args: argparse.Namespace, batch: torch.Tensor) -> float:
    mine = args.rank == rank and step == args.at
    if mine and args.fault == "raise":
        raise RuntimeError(f"simulated bug on rank {rank}")
    if mine and args.fault == "sleep":
        wait_for_the_others(3600)
    if step == args.at and args.fault == "busy":
        compute_silently(args.busy_s)
    if mine and args.fault == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(args.step_s)
    grad = batch.sum().reshape(1) * (rank + 1)
    if mine and args.fault == "mismatch":
        grad = torch.ones(3)
    if not (mine and args.fault == "skip"):
        dist.all_reduce(grad)
    return float(grad[0])


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    hang_at = args.at if args.fault == "loader" and rank == args.rank else None
    loader = torch.utils.data.DataLoader(Slow(hang_at), batch_size=1, num_workers=1)
    batches = iter(loader)
    for step in range(args.steps):
        loss = train_step(step, rank, args, next(batches))
        if rank == 0:
            print(f"step {step} loss {loss:.3f}", flush=True)
    if rank == 0:
        print(f"final_loss {loss:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A training script of one's own, as a researcher writes it: argparse options, torch DDP over
gloo on CPUs, and its metrics reported to hpctrain when hpctrain is there (docs/sweeps.md,
"Sweeping your own script").

It fits a small linear model to a fixed synthetic regression problem, each rank on its shard
of the data, and logs each epoch's training `loss` and `val_loss`. Swept over its learning rate:

    hpctrain sweep --profile local --nodes 2 --gpus-per-node 1 --grid lr=0.1,0.01 \
        -- python examples/own_script/train.py --epochs 3 --lr {lr}
    hpctrain sweep-report

It also runs alone, without a job or hpctrain (one process, no process group):

    python examples/own_script/train.py --lr 0.1 --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:
    from hpctrain.progress import log_metrics
except ImportError:  # the script runs without hpctrain too: nothing is recorded then

    def log_metrics(epoch: int, max_epochs: int | None = None, **metrics: object) -> None:
        del epoch, max_epochs, metrics


FEATURES, SAMPLES = 8, 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=0.01, help="the SGD learning rate")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def data(seed: int, rank: int, world: int) -> tuple[torch.Tensor, ...]:
    """The same problem on every rank (one seed); each trains on its own shard of it."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    split = SAMPLES * 3 // 4
    return x[rank:split:world], y[rank:split:world], x[split:], y[split:]


def mean_over_ranks(value: torch.Tensor, world: int) -> float:
    if world > 1:
        dist.all_reduce(value)
        value = value / world
    return float(value)


def main() -> None:
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        # The launcher's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (srun's or torchrun's).
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    x, y, x_val, y_val = data(args.seed, rank, world)
    model: nn.Module = nn.Linear(FEATURES, 1)
    if world > 1:
        model = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    for epoch in range(args.epochs):
        for i in range(0, len(x), args.batch_size):
            opt.zero_grad()
            loss_fn(model(x[i:i + args.batch_size]), y[i:i + args.batch_size]).backward()
            opt.step()
        with torch.no_grad():
            loss = mean_over_ranks(loss_fn(model(x), y), world)
            val_loss = mean_over_ranks(loss_fn(model(x_val), y_val), world)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss:.4f} val_loss {val_loss:.4f}", flush=True)
        # Every rank may call it: only rank 0 writes the run's metrics.json.
        log_metrics(epoch, max_epochs=args.epochs, loss=loss, val_loss=val_loss)
    if world > 1:
        # Leave together, then at once: gloo across nodes can abort in its teardown when a
        # peer has gone first (examples/tutorials/ranks.py), failing a finished run.
        dist.barrier()
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

"""The Marvin tutorial's program (004, Scripts/MNIST.py) on CPUs: one process per node starts
one worker per GPU with torch.multiprocessing.spawn.

Run it with `--launcher per-node`:

    hpctrain submit --profile local --gpus-per-node 2 --launcher per-node -- \
        python examples/tutorials/spawn_per_node.py

The job gives each node NNODES, NODE_RANK, GPUS_PER_NODE, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT. Without a job, set them yourself:

    NNODES=1 NODE_RANK=0 GPUS_PER_NODE=2 WORLD_SIZE=2 MASTER_ADDR=localhost \
        MASTER_PORT=29500 python examples/tutorials/spawn_per_node.py /tmp/ranks
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# The sibling module (this file's folder is on sys.path, also in spawned workers).
from ranks import out_dir_from, report, teardown


def setup(rank: int, world_size: int) -> None:
    # The tutorial sets MASTER_ADDR=localhost, which only works on one node: keep the job's.
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "11111")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def train(local_rank: int, workers: int, out_dir: Path) -> None:
    """One worker (the tutorial's train_mnist), with its rank across all nodes."""
    node_rank = int(os.environ.get("NODE_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", str(workers)))
    rank = node_rank * workers + local_rank
    setup(rank, world_size)
    # The tutorial's DDP(model, device_ids=[rank]) is right on one node only: the GPU is the
    # local rank, and on CPUs there is none to pick.
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.randn(8, 4)).sum().backward()
    report(out_dir, rank, world_size, local_rank)
    teardown()


def main() -> None:
    # The tutorial's nprocs=torch.cuda.device_count(); a CPU-only node has no GPUs to count.
    workers = torch.cuda.device_count() or int(os.environ.get("GPUS_PER_NODE") or 1) or 1
    out_dir = out_dir_from(sys.argv)
    mp.spawn(train, args=(workers, out_dir), nprocs=workers, join=True)


if __name__ == "__main__":
    main()

"""The torchrun tutorial's worker (003, train_distributed.py) on CPUs: a program written for
torchrun's environment, which reads RANK, LOCAL_RANK and WORLD_SIZE.

It runs unchanged under either launcher:

    hpctrain submit --profile local --gpus-per-node 2 --launcher torchrun -- \
        python examples/tutorials/torchrun_env.py
    hpctrain submit --profile local --gpus-per-node 2 --launcher srun -- \
        python examples/tutorials/torchrun_env.py

torchrun sets the variables for each worker it starts; hpctrain's srun launcher sets them for
each task from SLURM_PROCID, SLURM_LOCALID and SLURM_NTASKS. Without a job:

    torchrun --standalone --nproc-per-node 2 examples/tutorials/torchrun_env.py /tmp/ranks
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

# The sibling module (this file's folder is on sys.path).
from ranks import out_dir_from, report, teardown


def setup_distributed() -> tuple[int, int, int]:
    """Join the process group that the launcher described; (rank, local rank, world size)."""
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    # The tutorial's "nccl" and torch.cuda.set_device(local_rank), for CPUs.
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size)
    return rank, local_rank, world_size


def main() -> None:
    out_dir = out_dir_from(sys.argv)
    rank, local_rank, world_size = setup_distributed()
    if rank == 0:
        print(f"Starting distributed training on {world_size} processes", flush=True)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.randn(8, 4)).sum().backward()
    report(out_dir, rank, world_size, local_rank)
    teardown()


if __name__ == "__main__":
    main()

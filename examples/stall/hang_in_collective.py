"""A DDP program whose last rank hangs in its own code while the others wait in all_reduce.

The stall watcher's test case (docs/long-runs.md): every rank reports its step with
`hpctrain.progress.report`, as a program of one's own does; at step HANG_AT the last rank
sleeps in `load_next_shard` instead of joining the all_reduce, and the collective timeout is an
hour, as long trainings set it. Run under srun or torchrun (RANK and WORLD_SIZE set), with gloo;
HANG_AT, STEPS and HANG_TIMES=N (hang in the first N attempts only; HANG_ONCE=1 is 1) shape it.
"""

from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist

from hpctrain.progress import report

HANG_AT = int(os.environ.get("HANG_AT", "5"))
STEPS = int(os.environ.get("STEPS", "1000"))
# Hang in the first N attempts only (the run directory counts them), as a node's fault would;
# 0: in every attempt.
HANG_TIMES = int(os.environ.get("HANG_TIMES") or ("1" if os.environ.get("HANG_ONCE") == "1"
                                                   else "0"))


def load_next_shard(step: int) -> None:
    """Where the last rank hangs (a stuck read of a shared file system, say)."""
    if step != HANG_AT:
        return
    if HANG_TIMES:
        marker = os.path.join(os.environ.get("HPCTRAIN_RUN_DIR", "."), "hangs")
        with open(marker, "a+") as f:
            f.seek(0)
            if len(f.readlines()) >= HANG_TIMES:
                return
            f.write("hung\n")
    time.sleep(10**6)


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.ones(4)
    for step in range(STEPS):
        if rank == world - 1:
            load_next_shard(step)
        dist.all_reduce(value)
        report(step)
        time.sleep(0.2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

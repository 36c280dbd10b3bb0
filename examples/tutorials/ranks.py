"""What every tutorial pattern's rank does at the end, so that a test can count the ranks."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def out_dir_from(argv: list[str]) -> Path:
    """The directory for the rank files: the first argument, else $HPCTRAIN_RUN_DIR/ranks."""
    return Path(argv[1] if len(argv) > 1
                else os.path.join(os.environ["HPCTRAIN_RUN_DIR"], "ranks"))


def report(out_dir: Path, rank: int, world_size: int, local_rank: int) -> None:
    """All ranks add 1: a wrong world size hangs or fails here; then one line per rank."""
    total = torch.ones(1)
    dist.all_reduce(total)
    if int(total.item()) != world_size:
        sys.exit(f"rank {rank}: all_reduce summed {int(total.item())}, not {world_size}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"rank-{rank}.txt", "a") as f:
        f.write(f"rank {rank} of {world_size} host {socket.gethostname()} "
                f"threads {torch.get_num_threads()} local {local_rank}\n")


def teardown() -> None:
    """Leave together, at once.

    With gloo across two nodes (torch 2.13), a rank that tears down or exits normally while a
    rank of the other node (or the torchrun agent holding the store) has already gone may abort
    in a background thread ("terminate called without an active exception"), failing a job
    whose every rank had finished: seen in about one two-node run in three, and in Debian's
    torch 2.6 under Lightning on one node. The barrier makes every rank finish first; os._exit
    then skips the teardown that races.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

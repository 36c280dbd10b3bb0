"""A program that runs torchrun itself, as some training repositories' entry points do (a
`train.sh` or a Python launcher around `torchrun ... train.py`), on CPUs.

Run it with `--launcher per-node`: the job starts it once per node, and it hands torchrun what
the job set for the node:

    hpctrain submit --profile local --gpus-per-node 2 --launcher per-node -- \
        python examples/tutorials/own_torchrun.py

torchrun then starts LOCAL_WORLD_SIZE workers of torchrun_env.py on each node, with the
static rendezvous at MASTER_ADDR:MASTER_PORT (the job's first node). Its arguments go to the
worker (the directory for the rank files).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("torchrun_env.py")


def torchrun_argv(env: dict[str, str], worker_args: list[str]) -> list[str]:
    """torchrun's command line for this node, from the variables --launcher per-node sets."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={env['NNODES']}", f"--node-rank={env['NODE_RANK']}",
        f"--nproc-per-node={env['LOCAL_WORLD_SIZE']}",
        f"--master-addr={env['MASTER_ADDR']}", f"--master-port={env['MASTER_PORT']}",
        str(WORKER), *worker_args,
    ]


if __name__ == "__main__":
    sys.exit(subprocess.call(torchrun_argv(dict(os.environ), sys.argv[1:])))

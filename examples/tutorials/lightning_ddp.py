"""The Lightning tutorials' program (000 Raven, 001 Gilbreth, 002 multi-node) on CPUs: a
LightningModule trained with Trainer(strategy="ddp"); Lightning finds its ranks itself.

Under `--launcher srun` (Raven's jobs) each SLURM task is one rank and Lightning reads SLURM's
variables; devices must equal the tasks per node:

    hpctrain submit --profile local --nodes 2 --gpus-per-node 2 --launcher srun -- \
        python examples/tutorials/lightning_ddp.py --devices 2 --num-nodes 2

Under `--launcher per-node` (Gilbreth's single-node job) one process per node starts the
others with Lightning's own launcher:

    hpctrain submit --profile local --gpus-per-node 2 --launcher per-node -- \
        python examples/tutorials/lightning_ddp.py --devices 2

Without a job, that is the same as `python examples/tutorials/lightning_ddp.py --devices 2
--out /tmp/ranks`. --devices and --num-nodes default to the job's GPUS_PER_NODE and NNODES
(per-node) or SLURM_NTASKS_PER_NODE and SLURM_NNODES (srun).
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

import lightning as L
import torch
import torch.distributed as dist

# The sibling module (this file's folder is on sys.path, also in Lightning's worker processes).
from ranks import teardown
from torch.utils.data import DataLoader, TensorDataset


class TinyModel(L.LightningModule):
    """The tutorials' model, reduced to one layer; it reports its rank when training ends."""

    def __init__(self, out_dir: Path) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 2)
        self.out_dir = out_dir

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_train_end(self) -> None:
        # All ranks add 1: a wrong world size hangs or fails here; then one line per rank.
        rank, world_size = self.global_rank, self.trainer.world_size
        total = torch.ones(1)
        dist.all_reduce(total)
        if int(total.item()) != world_size:
            raise SystemExit(f"rank {rank}: all_reduce summed {int(total.item())}, "
                             f"not {world_size}")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_dir / f"rank-{rank}.txt", "a") as f:
            f.write(f"rank {rank} of {world_size} host {socket.gethostname()} "
                    f"threads {torch.get_num_threads()} local {self.local_rank}\n")


def _from_env(*names: str) -> int:
    return int(next((os.environ[n] for n in names if os.environ.get(n)), "1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int,
                        default=_from_env("GPUS_PER_NODE", "SLURM_NTASKS_PER_NODE"))
    parser.add_argument("--num-nodes", type=int, default=_from_env("NNODES", "SLURM_NNODES"))
    parser.add_argument("--out", type=Path, default=None,
                        help="where each rank writes its line (default $HPCTRAIN_RUN_DIR/ranks)")
    args = parser.parse_args()
    out_dir = args.out or Path(os.environ["HPCTRAIN_RUN_DIR"]) / "ranks"
    data = TensorDataset(torch.randn(64, 2), torch.randint(0, 2, (64,)))
    trainer = L.Trainer(
        accelerator="cpu", strategy="ddp", devices=args.devices, num_nodes=args.num_nodes,
        max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=out_dir,
    )
    trainer.fit(TinyModel(out_dir), DataLoader(data, batch_size=8))
    teardown()


if __name__ == "__main__":
    main()

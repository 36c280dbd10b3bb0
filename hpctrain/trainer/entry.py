"""`python -m hpctrain.trainer`: the command rendered sbatch scripts run under srun or torchrun."""

from __future__ import annotations

import argparse
import sys

from hpctrain import rundir
from hpctrain.errors import HpctrainError
from hpctrain.trainconfig.load import dump_config, load_config, shortcut_overrides
from hpctrain.trainconfig.model import TASKS
from hpctrain.trainer.signals import TrainingStopped

EPILOG = f"""\
config layers (later wins): the task's shipped default < --config FILE < --set KEY=VALUE <
shortcut flags. KEY is the dotted path of any field, VALUE is YAML:
  --set trainer.max_epochs=5  --set model.hidden=[128,64]  --set data.dir=/ptmp/me/mnist
The run directory is --run-dir, else $HPCTRAIN_RUN_DIR, else ./hpctrain-runs/<task>-<id>.
SIGUSR1, SIGTERM or a {rundir.STOP_REQUESTED} file in the run directory stop training safely:
the checkpoint is saved and the exit status is 75, for the job to requeue itself.

examples:
  python -m hpctrain.trainer --task spiral --max-epochs 5
  srun python -m hpctrain.trainer --config my.yaml --scale-lr linear
  python -m hpctrain.trainer --config my.yaml --print-config
"""


def build_parser() -> argparse.ArgumentParser:
    """The trainer's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m hpctrain.trainer",
        description="Train a packaged task with Lightning, locally or as a SLURM job step.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="YAML config (only the fields it changes)")
    p.add_argument("--task", choices=TASKS, help="task whose shipped default to start from")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one field, e.g. trainer.max_epochs=5 (repeatable)",
    )
    p.add_argument("--max-epochs", type=int, help="= --set trainer.max_epochs=N")
    p.add_argument("--batch-size", type=int, help="per device; = --set trainer.batch_size=N")
    p.add_argument("--lr", type=float, help="base learning rate; = --set optim.lr=X")
    p.add_argument("--seed", type=int, help="= --set seed=N")
    p.add_argument(
        "--scale-lr", choices=("none", "linear"), help="linear: lr x world size (optim.scale_lr)"
    )
    p.add_argument("--global-batch", type=int, metavar="N",
                   help="samples per optimizer step on any topology "
                   "(= --set trainer.global_batch=N)")
    p.add_argument("--max-device-batch", type=int, metavar="B",
                   help="with --global-batch: at most B per device, accumulate the rest")
    p.add_argument("--run-dir", metavar="DIR",
                   help=f"checkpoints, logs and {rundir.METRICS} go here")
    p.add_argument(
        "--resume",
        default="auto",
        metavar="auto|never|PATH",
        help=f"auto (default): continue from the run dir's {rundir.LAST_CKPT} if present",
    )
    p.add_argument("--print-config", action="store_true", help="print the resolved config, exit")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, and turn hpctrain errors into one 'Error:' line."""
    args = build_parser().parse_args(argv)
    overrides = [
        *args.sets,
        *shortcut_overrides(args.max_epochs, args.batch_size, args.lr, args.seed, args.scale_lr,
                            args.global_batch, args.max_device_batch),
    ]
    try:
        config = load_config(args.config, args.task, overrides)
        if args.print_config:
            sys.stdout.write(dump_config(config))
            return 0
        from hpctrain.trainer.runner import run_training

        run_training(config, args.run_dir, args.resume)
    except TrainingStopped as e:
        return e.exit_code
    except HpctrainError as e:
        print(f"Error: {e.what}", file=sys.stderr)
        if e.fix:
            print(f"  Fix: {e.fix}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0

"""`python -m hpctrain.trainer`: the command rendered sbatch scripts run under srun or torchrun."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from hpctrain import timeline
from hpctrain.errors import HpctrainError
from hpctrain.startup.cycles import without_cycle_search
from hpctrain.trainconfig.load import dump_config
from hpctrain.trainconfig.options import TrainerCall, add_arguments, config_args
from hpctrain.trainer import lean, workers
from hpctrain.trainer.signals import EXIT_REQUEUE, TrainingStopped
from hpctrain.values import rundir

EPILOG = f"""\
config layers (later wins): the task's defaults < --config FILE < --set KEY=VALUE <
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
    """The trainer's argument parser, from the option table `hpctrain train` shares."""
    p = argparse.ArgumentParser(
        prog="python -m hpctrain.trainer",
        description="Train a packaged task with Lightning, locally or as a SLURM job step.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add_arguments(p)
    return p


def run(call: TrainerCall) -> int:
    """What a parsed command line asks for: print the resolved settings, or train with them;
    the exit status (`hpctrain train` runs this too; hpctrain errors propagate to the caller's
    boundary). The trainer of a per-node launch trains on its node's workers (workers.py)."""
    config = call.load()
    if call.print_config:
        sys.stdout.write(dump_config(config))
        return 0
    launch = workers.node_launch(os.environ)
    if launch is not None:
        workers.before_imports()
    # Torch and Lightning load only now: --help and --print-config stay fast; and Lightning's
    # import of torchmetrics leaves out the domains nobody asked for (lean.py says why).
    # Without the cycle search, and what they made frozen after (a per-node launch forks
    # next, as the gc module's documentation advises for fork): it ran over every object
    # torch had made, again and again; `import lightning` took 2.65 s with it and 1.85 s
    # without (this CPU, one process; each rank pays it). The 200,000 objects it would have
    # freed stay, in memory the allocator had taken anyway (339 against 331 MB).
    with without_cycle_search(freeze=True):
        lean.install()
        timeline.watch_imports()
        from hpctrain.trainer.runner import run_training
    timeline.imports_done()

    def train() -> None:
        run_training(config, call.run_dir, call.resume_mode)

    if launch is not None and launch.workers > 1:
        spawn = (sys.executable, "-m", "hpctrain.trainer", *config_args(config), *call.run_args())
        return workers.run_node(launch, lambda: leave(outcome(train)), spawn)
    if launch is not None:
        os.environ.update(launch.worker_env(0))
    train()
    return 0


def outcome(work: Callable[[], int | None]) -> int:
    """The exit status of `work`: its own, a safe stop's 75, or 1 with hpctrain's 'Error:' line."""
    try:
        return work() or 0
    except TrainingStopped as e:
        return e.exit_code
    except HpctrainError as e:
        print(f"Error: {e.what}", file=sys.stderr)
        if e.fix:
            print(f"  Fix: {e.fix}", file=sys.stderr)
        return getattr(e, "exit_code", 1)
    except KeyboardInterrupt:
        return 130


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, and turn hpctrain errors into one 'Error:' line."""
    call = TrainerCall.from_values(vars(build_parser().parse_args(argv)))
    return outcome(lambda: run(call))


def leave(code: int) -> NoReturn:
    """Exit at once, everything being on disk, instead of tearing down the interpreter.

    A stop (EXIT_REQUEUE): srun --kill-on-bad-exit kills ranks that are still exiting, and
    tearing down live process groups can hang. A finished DDP run: with gloo, a rank whose
    interpreter tears down after a peer has gone may abort in a background thread ("terminate
    called without an active exception", exit 134), failing a job whose every rank finished;
    the barrier makes all ranks finish first (examples/tutorials/ranks.py does the same).
    `python -m hpctrain.trainer` and `hpctrain train` both leave this way.
    """
    if code == 0:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            sys.exit(0)
        dist.barrier()
    elif code != EXIT_REQUEUE:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def leave_if_distributed() -> None:
    """A rank of a DDP run (torchrun, srun) leaves as `leave(0)` does; one process returns."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        leave(0)

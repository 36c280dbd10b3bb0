"""`hpctrain train`: run the packaged trainer on this machine (the same code jobs run).

Its options are generated from the table `python -m hpctrain.trainer` is built from
(trainconfig/options.py): the same names, metavars, help and order.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

import typer

from hpctrain.cli.options import signature_of, trainer_parameter
from hpctrain.cli.output import print_err
from hpctrain.errors import HpctrainError
from hpctrain.trainconfig.options import OPTIONS, TrainerCall

TRAIN_EPILOG = (
    "Config layers, later winning: the task's defaults, --config FILE, --set KEY=VALUE "
    "(dotted key, YAML value, repeatable), then the shortcut flags.\n\n"
    "Examples:\n\n"
    "  hpctrain train --task spiral --max-epochs 5\n\n"
    "  hpctrain train --config my.yaml --set model.hidden=[128,64] --print-config"
)


def _train(**values: Any) -> None:
    """Train a packaged task locally, without SLURM."""
    # The trainer's modules (the config models; torch and Lightning once training starts)
    # load only when the command runs: `hpctrain --help` stays fast.
    from hpctrain.trainer.threads import set_for_local_run

    # Before torch loads: it reads OMP_NUM_THREADS once, when imported.
    chosen = set_for_local_run()
    if chosen is not None and not values.get("print_config"):
        print_err(chosen.note(), lead="note:", style="yellow")
    try:
        from hpctrain.trainer.entry import leave_if_distributed, run

        code = run(TrainerCall.from_values(values))
    except ModuleNotFoundError as e:
        from hpctrain.submission.submit import install_trainer, trainer_missing

        if not trainer_missing(e):
            raise
        raise HpctrainError(
            f"the packaged trainer needs torch and Lightning, and this Python ({sys.executable}) "
            f"cannot import {e.name}: hpctrain was installed without its trainer",
            f"install it: {install_trainer(shlex.quote(sys.executable))}",
        ) from None
    if code:  # a per-node launch's workers stopped safely (75)
        raise typer.Exit(code)
    # Under torchrun or srun: every rank leaves together, without tearing down gloo.
    leave_if_distributed()


def train_command() -> Any:
    """`hpctrain train` as a function whose signature is the option table."""
    def train(**values: Any) -> None:
        _train(**values)

    train.__doc__ = _train.__doc__
    signature_of(train, [trainer_parameter(o) for o in OPTIONS])
    return train


def register(app: typer.Typer) -> None:
    """Add `hpctrain train` to the root app."""
    app.command("train", epilog=TRAIN_EPILOG)(train_command())

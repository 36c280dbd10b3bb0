"""`hpctrain train`: run the packaged trainer on this machine (the same code jobs run).

Its options are generated from the table `python -m hpctrain.trainer` is built from
(trainconfig/options.py): the same names, metavars, help and order.
"""

from __future__ import annotations

import inspect
import shlex
import sys
from typing import Annotated, Any

import typer

from hpctrain.errors import HpctrainError
from hpctrain.trainconfig.options import OPTIONS, TrainerCall, TrainerOption

TRAIN_EPILOG = (
    "Config layers, later winning: the task's defaults, --config FILE, --set KEY=VALUE "
    "(dotted key, YAML value, repeatable), then the shortcut flags.\n\n"
    "Examples:\n\n"
    "  hpctrain train --task spiral --max-epochs 5\n\n"
    "  hpctrain train --config my.yaml --set model.hidden=[128,64] --print-config"
)


def _parameter(option: TrainerOption) -> inspect.Parameter:
    """One table entry as the keyword parameter typer reads."""
    declared = typer.Option(option.flag, help=option.help, metavar=option.metavar,
                            show_default=False)
    kind: Any = {bool: bool, list: list[str] | None, str: str | None}[option.value_type]
    default = False if option.switch else None
    return inspect.Parameter(option.dest, inspect.Parameter.KEYWORD_ONLY,
                             annotation=Annotated[kind, declared], default=default)


def _train(**values: Any) -> None:
    """Train a packaged task locally, without SLURM."""
    # The trainer's modules (the config models; torch and Lightning once training starts)
    # load only when the command runs: `hpctrain --help` stays fast.
    try:
        from hpctrain.trainer.entry import run

        run(TrainerCall.from_values(values))
    except ModuleNotFoundError as e:
        from hpctrain.submission.submit import install_trainer, trainer_missing

        if not trainer_missing(e):
            raise
        raise HpctrainError(
            f"the packaged trainer needs torch and Lightning, and this Python ({sys.executable}) "
            f"cannot import {e.name}: hpctrain was installed without its trainer",
            f"install it: {install_trainer(shlex.quote(sys.executable))}",
        ) from None


def train_command() -> Any:
    """`hpctrain train` as a function whose signature is the option table."""
    params = [_parameter(o) for o in OPTIONS]

    def train(**values: Any) -> None:
        _train(**values)

    train.__doc__ = _train.__doc__
    train.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    # typer resolves annotations through get_type_hints too: give it the real objects.
    train.__annotations__ = {p.name: p.annotation for p in params}
    return train


def register(app: typer.Typer) -> None:
    """Add `hpctrain train` to the root app."""
    app.command("train", epilog=TRAIN_EPILOG)(train_command())

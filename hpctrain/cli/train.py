"""`hpctrain train`: run the packaged trainer on this machine (the same code jobs run)."""

from __future__ import annotations

from typing import Annotated

import typer

from hpctrain import rundir

TRAIN_EPILOG = (
    "Config layers, later winning: the task's shipped default, --config FILE, --set KEY=VALUE "
    "(dotted key, YAML value, repeatable), then the shortcut flags.\n\n"
    "Examples:\n\n"
    "  hpctrain train --task spiral --max-epochs 5\n\n"
    "  hpctrain train --config my.yaml --set model.hidden=[128,64] --print-config"
)


def register(app: typer.Typer) -> None:
    """Add `hpctrain train` to the root app."""

    @app.command(epilog=TRAIN_EPILOG)
    def train(
        config: Annotated[
            str | None, typer.Option("--config", help="Trainer YAML (only the fields it changes).")
        ] = None,
        task: Annotated[
            str | None,
            typer.Option(help="spiral, mnist, fashionmnist or custom (default: the file's task)."),
        ] = None,
        sets: Annotated[
            list[str] | None,
            typer.Option("--set", help="Override a field: KEY=VALUE, e.g. trainer.max_epochs=5."),
        ] = None,
        max_epochs: Annotated[
            int | None, typer.Option(help="Same as --set trainer.max_epochs=N.")
        ] = None,
        batch_size: Annotated[
            int | None, typer.Option(help="Per device; same as --set trainer.batch_size=N.")
        ] = None,
        lr: Annotated[float | None, typer.Option(help="Base learning rate (optim.lr).")] = None,
        seed: Annotated[int | None, typer.Option(help="Same as --set seed=N.")] = None,
        scale_lr: Annotated[
            str | None, typer.Option(help="none, or linear: lr x world size (optim.scale_lr).")
        ] = None,
        run_dir: Annotated[
            str | None,
            typer.Option(help="Run directory (default: $HPCTRAIN_RUN_DIR, else ./hpctrain-runs/)."),
        ] = None,
        resume: Annotated[
            str, typer.Option(help=f"auto (continue from the run dir's {rundir.LAST_CKPT}), "
                              "never, or PATH.")
        ] = "auto",
        print_config: Annotated[
            bool, typer.Option("--print-config", help="Print the resolved config and exit.")
        ] = False,
    ) -> None:
        """Train a packaged task locally, without SLURM."""
        # The trainer (torch, Lightning) loads only when a command needs it: `hpctrain --help`
        # stays fast.
        from hpctrain.trainconfig.load import dump_config, load_config, shortcut_overrides

        overrides = [
            *(sets or []),
            *shortcut_overrides(max_epochs, batch_size, lr, seed, scale_lr),
        ]
        cfg = load_config(config, task, overrides)
        if print_config:
            typer.echo(dump_config(cfg), nl=False)
            return
        from hpctrain.trainer.runner import run_training

        run_training(cfg, run_dir, resume)

"""The packaged trainer's command-line options, declared once, and a parsed command line.

`python -m hpctrain.trainer` (argparse, trainer/entry.py) and `hpctrain train` (typer,
cli/train.py) are both generated from OPTIONS: the same names, metavars, help and order. A
parsed command line is a TrainerCall. The job side reads a job's trainer command through
`parse_call` and writes the command back from the resolved settings with `config_args`, so
that a setting made in a file and the same flag give the same job.

Light at import (no pydantic, no YAML, no argparse): `hpctrain --help` builds `train`'s
options from this table.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, get_args

from hpctrain.errors import ConfigError
from hpctrain.tasks import registry
from hpctrain.trainsettings import ScaleLr
from hpctrain.values import rundir

if TYPE_CHECKING:
    import argparse

    from hpctrain.trainconfig.model import TrainConfig

# How the job side names the trainer's argv in its messages, and where the full list is.
_CALL = "the packaged trainer's command"
_HELP_FIX = "see `python -m hpctrain.trainer --help` for its options"


@dataclass(frozen=True)
class TrainerOption:
    """One option: its flag, what its value is, and the config field a shortcut sets."""

    flag: str
    help: str
    # None: a switch that takes no value; else the value's name in --help (its type).
    metavar: str | None = None
    # A shortcut's config field: `--max-epochs N` is `--set trainer.max_epochs=N`.
    key: str | None = None
    # Shown in --help; the config validates the value, as it would the same field in a file.
    choices: tuple[str, ...] = ()
    repeatable: bool = False
    dest_name: str | None = None

    @property
    def dest(self) -> str:
        """The parsed value's name (TrainerCall's field, or a shortcut's)."""
        return self.dest_name or self.flag.removeprefix("--").replace("-", "_")

    @property
    def switch(self) -> bool:
        return self.metavar is None

    @property
    def value_type(self) -> type:
        """bool for a switch, list for a repeatable option, else str: values stay text until
        the config validates them, so that a flag and a file refuse a value in the same words."""
        return bool if self.switch else list if self.repeatable else str


def _shortcut(flag: str, metavar: str, key: str, help: str,
              choices: tuple[str, ...] = ()) -> TrainerOption:
    shown = "|".join(choices) or metavar
    return TrainerOption(flag, f"{help}= --set {key}={shown}", shown, key, choices)


OPTIONS: tuple[TrainerOption, ...] = (
    TrainerOption("--config", "YAML config (only the fields it changes)", "FILE"),
    TrainerOption("--task", f"task whose defaults to start from: {', '.join(registry.names())}"
                  f" (default: the file's task:, else {registry.DEFAULT_TASK})", "TASK"),
    TrainerOption("--set", "override one field, e.g. trainer.max_epochs=5 (repeatable)",
                  "KEY=VALUE", repeatable=True, dest_name="sets"),
    _shortcut("--max-epochs", "N", "trainer.max_epochs", "epochs to train; "),
    _shortcut("--batch-size", "N", "trainer.batch_size", "per device; "),
    _shortcut("--lr", "X", "optim.lr", "base learning rate; "),
    _shortcut("--seed", "N", "seed", ""),
    _shortcut("--scale-lr", "MODE", "optim.scale_lr", "linear: lr x world size; ",
              get_args(ScaleLr)),
    _shortcut("--global-batch", "N", "trainer.global_batch",
              "samples per optimizer step on any topology; "),
    _shortcut("--max-device-batch", "B", "trainer.max_device_batch",
              "with --global-batch: at most B per device, accumulate the rest; "),
    TrainerOption("--run-dir", f"checkpoints, logs and {rundir.METRICS} go here (default: "
                  "$HPCTRAIN_RUN_DIR, else ./hpctrain-runs/<task>-<id>)", "DIR"),
    TrainerOption("--resume", f"auto (default): continue from the run dir's {rundir.LAST_CKPT} "
                  "if present; never; or a checkpoint PATH", "auto|never|PATH"),
    TrainerOption("--print-config", "print the resolved config and exit"),
)
SHORTCUTS = tuple(o for o in OPTIONS if o.key is not None)


@dataclass(frozen=True)
class TrainerCall:
    """One command line of the trainer, parsed: where its settings come from, and the run."""

    config: str | None = None
    task: str | None = None
    sets: tuple[str, ...] = ()
    # The shortcut flags given, as (config field, value as typed), in the table's order.
    shortcuts: tuple[tuple[str, str], ...] = ()
    run_dir: str | None = None
    resume: str | None = None
    print_config: bool = False

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TrainerCall:
        """The call from parsed values by dest (argparse's namespace, typer's keywords)."""
        shortcuts = tuple((o.key, str(values[o.dest])) for o in SHORTCUTS
                          if o.key is not None and values.get(o.dest) is not None)
        return cls(config=values.get("config"), task=values.get("task"),
                   sets=tuple(values.get("sets") or ()), shortcuts=shortcuts,
                   run_dir=values.get("run_dir"), resume=values.get("resume"),
                   print_config=bool(values.get("print_config")))

    def adding(self, items: Iterable[tuple[str, object]]) -> TrainerCall:
        """This call with more shortcut settings (None values left out), applied last."""
        more = tuple((key, str(value)) for key, value in items if value is not None)
        return replace(self, shortcuts=self.shortcuts + more)

    def joined(self, later: TrainerCall) -> TrainerCall:
        """This call with `later`'s settings applied after its own; a config file or task
        named by both is refused (which one would win is not obvious)."""
        for name in ("config", "task"):
            if getattr(self, name) is not None and getattr(later, name) is not None:
                raise ConfigError(f"--{name} is given twice: as an option and in {_CALL}",
                                  "give it once")
        return replace(self, config=self.config or later.config, task=self.task or later.task,
                       sets=self.sets + later.sets, shortcuts=self.shortcuts + later.shortcuts)

    def given(self) -> list[str]:
        """The flags of the settings this call makes, in the table's order."""
        keys = {key for key, _ in self.shortcuts}
        made = {"--config": self.config is not None, "--task": self.task is not None,
                "--set": bool(self.sets)}
        return [o.flag for o in OPTIONS if made.get(o.flag) or o.key in keys]

    def overrides(self) -> list[str]:
        """The --set items of this call: explicit ones in order, then the shortcuts."""
        return [*self.sets, *(f"{key}={value}" for key, value in self.shortcuts)]

    def load(self) -> TrainConfig:
        """The validated settings: the task's default, the file, the overrides."""
        from hpctrain.trainconfig.load import load_config

        return load_config(self.config, self.task, self.overrides())

    @property
    def resume_mode(self) -> str:
        return self.resume or "auto"

    def run_args(self) -> tuple[str, ...]:
        """The options about the run rather than its settings, as given."""
        return (*(("--run-dir", self.run_dir) if self.run_dir is not None else ()),
                *(("--resume", self.resume) if self.resume is not None else ()),
                *(("--print-config",) if self.print_config else ()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of the table, in its order, on an argparse parser."""
    for o in OPTIONS:
        if o.switch:
            parser.add_argument(o.flag, dest=o.dest, action="store_true", help=o.help)
        elif o.repeatable:
            parser.add_argument(o.flag, dest=o.dest, action="append", default=[],
                                metavar=o.metavar, help=o.help)
        else:
            parser.add_argument(o.flag, dest=o.dest, metavar=o.metavar, help=o.help)


def parse_call(argv: Iterable[str]) -> TrainerCall:
    """A job's trainer arguments as the trainer will read them; ConfigError where it would
    refuse them (the job side must not exit)."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # argparse would print usage and exit 2
            raise ConfigError(f"{_CALL}: {message}", _HELP_FIX)

    parser = _Parser(prog="python -m hpctrain.trainer", add_help=False, allow_abbrev=False)
    add_arguments(parser)
    return TrainerCall.from_values(vars(parser.parse_args(list(argv))))


def config_args(config: TrainConfig) -> tuple[str, ...]:
    """The trainer arguments that rebuild `config` exactly: --task, then `--set KEY=VALUE` for
    every field that differs from the task's defaults, in field order."""
    defaults = _task_defaults(config.task)
    sets = [("--set", f"{key}={flow_value(value)}")
            for key, value in _fields(config) if _differs(value, defaults, key)]
    return ("--task", config.task, *(arg for pair in sets for arg in pair))


def _fields(section: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted key, value) of every field, in field order; sections are walked into, while a
    dict-valued field (custom.module_kwargs) is one value, whatever its keys."""
    from pydantic import BaseModel

    for name in type(section).model_fields:
        value = getattr(section, name)
        if isinstance(value, BaseModel):
            yield from _fields(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _differs(value: Any, defaults: Mapping[str, Any], key: str) -> bool:
    node: Any = defaults
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return True
        node = node[part]
    # Compared as written: True and 1, or 1 and 1.0, are different settings.
    return flow_value(value) != flow_value(node)


@functools.cache
def _task_defaults(task: str) -> dict[str, Any]:
    from hpctrain.trainconfig.load import task_defaults

    return task_defaults(task)


def flow_value(value: Any) -> str:
    """`value` as one line of flow YAML that the trainer's --set reads back as the same value
    (strings that look like numbers or null are quoted, floats keep their exponent)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        # A line break or control character would fold the line (or end it): escape it.
        style = None if text.isprintable() else '"'
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

    _Dumper.add_representer(str, _str)
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, width=1 << 30,
                     allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...")

"""A command line parsed from the option tables themselves, without click.

typer and click are most of a `render`'s start-up on a login node (29 ms of its imports), and a
`render` is typed again and again. Its options are rows of tables (cli/options.py: the job's,
the trainer's, the command's own), so its usual command lines are read here from the same rows;
anything this parser does not take exactly as click would (an unknown or abbreviated option,
`--help`, a value that is missing or does not convert plainly, a bound not met, short options
run together) is left to click, which answers it as always. Equal results for
the command lines both read are tested (tests/unit/test_plain_argv.py).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpctrain.cli.options import TRAINER_FLAGS, JobOptions, Row, job_table, trainer_option
from hpctrain.trainconfig.options import TrainerCall, TrainerOption

# The parse of a command line: values by parameter name, and the words of its trailing argument.
Parsed = tuple[dict[str, Any], list[str]]


@dataclass(frozen=True)
class _Option:
    """One option of the table as the plain parser reads it."""

    dest: str
    kind: str  # "flag", "str", "int", "path" or "list"
    flag_value: bool = True
    least: int | None = None


def _kind(annotation: Any) -> str:
    """How a row's type is read: the type without None."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if isinstance(annotation, types.UnionType) and len(args) == 1 else annotation
    if typing.get_origin(base) is list:
        return "list"
    return {bool: "flag", int: "int", str: "str", Path: "path"}.get(base, "unknown")


def _table(rows: Sequence[Row], trainer: Sequence[TrainerOption]) -> dict[str, _Option]:
    table: dict[str, _Option] = {}
    for row in rows:
        if row.flags.argument:
            continue
        kind = _kind(row.type)
        for decl in row.flags.decls:
            on, _, off = decl.partition("/")
            table[on] = _Option(row.name, kind, True, row.flags.min)
            if off:
                table[off] = _Option(row.name, kind, False)
    for option in trainer:
        kind = "flag" if option.switch else "list" if option.value_type is list else "str"
        table[option.flag] = _Option(option.dest, kind)
    return table


def job_call(args: Sequence[str], own: Sequence[Row]) -> tuple[JobOptions, dict[str, Any]] | None:
    """A job command's parse: its JobOptions (the table's rows and the trainer's options) and its
    own rows' values, as typer would hand them over; None: leave it to click."""
    trainer = [trainer_option(f) for f in TRAINER_FLAGS]
    parsed = parse(args, [*job_table(), *own], trainer)
    if parsed is None:
        return None
    values, command = parsed
    call = TrainerCall.from_values({o.dest: values.get(o.dest) for o in trainer})
    job = JobOptions(**{r.name: values.get(r.name, r.default) for r in job_table()
                        if not r.flags.argument}, command=command or None, trainer=call)
    return job, {r.name: values.get(r.name, r.default) for r in own}


def run_job(args: Sequence[str], own: Sequence[Row], command: Callable[..., object]) -> bool:
    """Run `command(job, **own values)` where `args` need no click; False: they do."""
    called = job_call(args, own)
    if called is None:
        return False
    command(called[0], **called[1])
    return True


def parse(args: Sequence[str], rows: Sequence[Row],
          trainer: Sequence[TrainerOption] = ()) -> Parsed | None:
    """`args` (after the command's name) as click would parse them for a command of these rows
    that stops at its first argument (allow_interspersed_args off); None: leave it to click."""
    table = _table(rows, trainer)
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--" or not word.startswith("-") or word == "-":
            rest = args[i + 1:] if word == "--" else args[i:]
            return (values, list(rest)) if _complete(values, rows) else None
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        option = table.get(name)
        if option is None or option.kind == "unknown":
            return None
        if option.kind == "flag":
            if eq:
                return None
            values[option.dest] = option.flag_value
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(args):
            # click takes the next word whatever it is (`--sbatch-arg --mail-type=END`).
            value, i = args[i + 1], i + 2
        else:
            return None
        if not _take(values, option, value):
            return None
    return (values, []) if _complete(values, rows) else None


def _complete(values: dict[str, Any], rows: Sequence[Row]) -> bool:
    """Every required option given (click says which is missing, and the fix)."""
    return all(r.name in values for r in rows
               if r.default is inspect.Parameter.empty and not r.flags.argument)


def _take(values: dict[str, Any], option: _Option, value: str) -> bool:
    """Put `value` in `values` as click converts it; False where click might say otherwise."""
    if option.kind == "list":
        values[option.dest] = [*values.get(option.dest, []), value]
    elif option.kind == "int":
        try:
            number = int(value) if value.isdigit() and value.isascii() else None
        except ValueError:  # more digits than Python converts: click says so
            number = None
        if number is None:
            return False
        if option.least is not None and number < option.least:
            return False
        values[option.dest] = number
    elif option.kind == "path":
        if not value:
            return False
        values[option.dest] = Path(value)
    else:
        values[option.dest] = value
    return True

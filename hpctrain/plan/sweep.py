"""A sweep's points as values: a grid, a list from a file, or random samples; and its arrays.

Pure rules: text in, points out. A point is an ordered tuple of (KEY, VALUE) settings, each
VALUE as the trainer's `--set KEY=VALUE` (or a command's `KEY=VALUE` argument) reads it. How
the points are split into SLURM job arrays (a site's MaxArraySize) is decided here too.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import random
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpctrain.errors import HpctrainError
from hpctrain.plan.model import SweepArray

Point = tuple[tuple[str, str], ...]

# Dotted config keys as the trainer's --set takes them (optim.lr, trainer.batch_size); the
# same rule keeps a command's KEY=VALUE argument from reading as an option or shell words.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# SLURM's own default; sites lower it (1001 on some) and `scontrol show config` says which.
DEFAULT_MAX_ARRAY_SIZE = 1001
DISTRIBUTIONS = ("uniform", "loguniform", "int", "choice")


@dataclass(frozen=True)
class Sweep:
    """The points, how they were made, and the keys that vary (the report's columns)."""

    method: str
    points: tuple[Point, ...]
    keys: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"method": self.method, "keys": list(self.keys),
                "points": [dict(p) for p in self.points]}


def _key(key: str, where: str) -> str:
    key = key.strip()
    if not _KEY.fullmatch(key):
        raise HpctrainError(f"{where}: {key!r} is not a setting's name",
                            "write a dotted key such as optim.lr or trainer.batch_size")
    return key


def _value(value: str, where: str) -> str:
    if not value.isprintable():
        raise HpctrainError(f"{where}: the value {value!r} holds a line break or control "
                            "character", "write each value on one line")
    return value


def _split(item: str, option: str) -> tuple[str, str]:
    key, sep, values = item.partition("=")
    if not sep or not values.strip():
        raise HpctrainError(f"{option} {item!r}: expected KEY=VALUES",
                            f"write e.g. {option} optim.lr=0.1,0.03")
    return _key(key, f"{option} {item!r}"), values


def grid(items: Sequence[str]) -> Sweep:
    """`--grid optim.lr=0.1,0.03 --grid trainer.batch_size=32,64`: every combination, the
    first key varying slowest (values with a comma come from a --points file instead)."""
    axes: dict[str, list[str]] = {}
    for item in items:
        key, values = _split(item, "--grid")
        if key in axes:
            raise HpctrainError(f"--grid names {key} twice", "give each key once, all values "
                                "comma-separated")
        parts = [_value(v.strip(), f"--grid {item!r}") for v in values.split(",")]
        if any(not p for p in parts) or len(set(parts)) != len(parts):
            raise HpctrainError(f"--grid {item!r}: an empty or repeated value",
                                "list each value once, comma-separated")
        axes[key] = parts
    points = tuple(tuple(zip(axes, combo, strict=True))
                   for combo in itertools.product(*axes.values()))
    return Sweep("grid", points, tuple(axes))


def from_table(text: str, name: str) -> Sweep:
    """A --points file: CSV with a header of keys (a `.csv`), else YAML, a list of mappings."""
    if name.lower().endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        rows = [r for r in rows if any(c.strip() for c in r)]
        if len(rows) < 2:
            raise HpctrainError(f"{name}: no points (a header of keys, then a row per point)",
                                "write e.g. optim.lr,trainer.batch_size then 0.1,32")
        keys = [_key(k, f"{name}, header") for k in rows[0]]
        table = []
        for n, row in enumerate(rows[1:], start=2):
            if len(row) != len(keys):
                raise HpctrainError(f"{name}, row {n}: {len(row)} values for {len(keys)} keys",
                                    "give every row one value per key in the header")
            table.append({k: v.strip() for k, v in zip(keys, row, strict=True)})
        return _table_sweep(table, name)
    return _table_sweep(_yaml_rows(text, name), name)


def _yaml_rows(text: str, name: str) -> list[dict[str, str]]:
    import yaml

    from hpctrain.trainconfig.options import flow_value

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise HpctrainError(f"{name}{where}: not valid YAML",
                            "write a list of mappings, e.g. - {optim.lr: 0.1}") from None
    if not isinstance(data, list) or not data or not all(isinstance(p, dict) for p in data):
        raise HpctrainError(f"{name}: expected a list of mappings, one per point",
                            "write e.g. - {optim.lr: 0.1, trainer.batch_size: 32}")
    return [{str(k): flow_value(v) for k, v in p.items()} for p in data]


def _table_sweep(rows: list[dict[str, str]], name: str) -> Sweep:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    points = []
    for n, row in enumerate(rows, start=1):
        where = f"{name}, point {n}"
        if not row:
            raise HpctrainError(f"{where}: no settings", "give every point at least one")
        points.append(tuple((_key(k, where), _value(v, where)) for k, v in row.items()))
    if len(set(points)) != len(points):
        raise HpctrainError(f"{name}: a point is listed twice", "list each point once")
    return Sweep("list", tuple(points), tuple(keys))


def samples(items: Sequence[str], count: int, seed: int) -> Sweep:
    """`--sample optim.lr=loguniform:1e-4,1e-1` x `--samples N` with `--seed S`: the same
    seed gives the same points on every machine (Python's own generator, no numpy)."""
    rng = random.Random(seed)
    laws = [(_split(item, "--sample"), item) for item in items]
    dists = [(key, _distribution(text, item)) for (key, text), item in laws]
    if len({k for k, _ in dists}) != len(dists):
        raise HpctrainError("--sample names a key twice", "give each key one distribution")
    points = tuple(tuple((key, draw(rng)) for key, draw in dists) for _ in range(count))
    return Sweep("random", points, tuple(k for k, _ in dists))


def _distribution(text: str, item: str) -> Callable[[random.Random], str]:
    """A draw function for `uniform:a,b`, `loguniform:a,b`, `int:a,b` or `choice:x,y,z`."""
    law, sep, args = text.partition(":")
    parts = [a.strip() for a in args.split(",")] if sep else []
    fix = ("write uniform:A,B, loguniform:A,B (A > 0), int:A,B (both included) or "
           "choice:X,Y,Z")
    if law == "choice" and parts and all(parts):
        return lambda rng: rng.choice(parts)
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise HpctrainError(f"--sample {item!r}: {text!r} is not a distribution", fix) from None
    if law not in DISTRIBUTIONS or not low < high or (law == "loguniform" and low <= 0):
        raise HpctrainError(f"--sample {item!r}: {text!r} is not a distribution", fix)
    if law == "int":
        if low != int(low) or high != int(high):
            raise HpctrainError(f"--sample {item!r}: int takes whole bounds", fix)
        return lambda rng: str(rng.randint(int(low), int(high)))
    if law == "uniform":
        return lambda rng: f"{rng.uniform(low, high):.6g}"
    return lambda rng: f"{math.exp(rng.uniform(math.log(low), math.log(high))):.6g}"


def with_fixed(sweep: Sweep, fixed: Sequence[str]) -> Sweep:
    """Refuse a --set of a key the sweep varies (which one would the point run with?)."""
    for item in fixed:
        key = item.partition("=")[0].strip()
        if key in sweep.keys:
            raise HpctrainError(f"--set {item!r}: {key} is swept",
                                f"leave --set {key} out, or sweep it alone")
    return sweep


# `{optim.lr}` in an argument of the user's command: the point's value there. `${VAR}` stays
# the shell's, and `{{` and `}}` are literal braces (str.format's escapes).
_FIELD = re.compile(r"\{\{|\}\}|(?<!\$)\{(" + _KEY.pattern + r")\}")


def placeholders(command: Sequence[str]) -> tuple[str, ...]:
    """The `{KEY}` placeholders of a command, in order of appearance (none: the point's
    settings are appended Hydra-style instead)."""
    return tuple(dict.fromkeys(m.group(1) for arg in command for m in _FIELD.finditer(arg)
                               if m.group(1)))


def check_placeholders(command: Sequence[str], sweep: Sweep) -> None:
    """Refuse a placeholder no point can fill: an unknown key, a point without it, the program."""
    names = placeholders(command)
    if not names:
        return
    known = ", ".join(f"{{{k}}}" for k in sweep.keys)
    unknown = [n for n in names if n not in sweep.keys]
    if unknown:
        raise HpctrainError(
            f"the command names {', '.join(f'{{{n}}}' for n in unknown)}, which the sweep does "
            f"not vary (its keys: {known})",
            "use the sweep's keys; write a literal brace as {{ or }}")
    if placeholders(command[:1]):
        raise HpctrainError(f"the program {command[0]!r} holds a placeholder",
                            "put placeholders in the program's arguments")
    if any("\n" in arg for arg in fill_command(command, ())[1]):
        raise HpctrainError("an argument from the first placeholder on holds a line break "
                            "(a point's arguments are one per line of a file)",
                            "move it before the first placeholder, or into a file")
    for n, point in enumerate(sweep.points):
        lacking = [name for name in names if name not in dict(point)]
        if lacking:
            raise HpctrainError(f"point {n} has no value for {', '.join(lacking)}",
                                "give every point a value for each placeholder")


def fill_command(command: Sequence[str], point: Point) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A command with placeholders, filled with the point's values: (the arguments before the
    first placeholder, every point's alike; the rest, this point's), each value one argument
    or inside one, never read by a shell."""
    values = dict(point)

    def fill(arg: str) -> str:
        return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)) if m.group(1)
                          else m.group(0)[0], arg)

    first = next((i for i, arg in enumerate(command) if placeholders([arg])), len(command))
    return (tuple(fill(a) for a in command[:first]), tuple(fill(a) for a in command[first:]))


def chunks(count: int, max_array_size: int, throttle: int | None) -> tuple[SweepArray, ...]:
    """Arrays of at most `max_array_size` tasks (SLURM's limit is on the task id, which
    starts at 0); each later array waits for the one before, so `throttle` holds overall."""
    if count < 1:
        raise HpctrainError("the sweep has no points", "give --grid, --points or --sample")
    if max_array_size < 1:
        raise HpctrainError(f"MaxArraySize {max_array_size}: job arrays are off on this "
                            "cluster", "ask the admins, or submit the points one by one")
    width = point_width(count)
    return tuple(SweepArray(start, min(max_array_size, count - start), throttle, width)
                 for start in range(0, count, max_array_size))


def point_width(count: int) -> int:
    """Digits of a point's directory name, so that a listing sorts as the points do."""
    return max(3, len(str(count - 1)))


def point_dir_name(index: int, count: int) -> str:
    """The name of point `index`'s run directory (the script's printf makes the same)."""
    return f"{index:0{point_width(count)}d}"


def describe(point: Point) -> str:
    """A point by its swept names and values (`optim.lr=0.1 seed=2`), as a shell would read
    them back."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in point)


# Hydra's own options: a command with only these takes its settings as KEY=VALUE words.
_HYDRA_FLAGS = ("--config-name", "--config-path", "--config-dir", "--multirun", "--cfg",
                "--resolve", "--package", "--info", "--run", "--hydra-help", "--help")
# Words a shell reads as they are (a `{lr}` placeholder among them: no comma, no expansion).
_PLAIN = re.compile(r"[\w@%+=:./{}-]+")
# The packaged trainer under its CLI name: it takes a point's settings as --set KEY=VALUE.
TRAIN_COMMAND = ("hpctrain", "train")


def script_args(command: Sequence[str]) -> tuple[str, ...]:
    """The arguments the user's program reads: after its `.py` file or `-m MODULE` (so that
    python's, torchrun's or srun's own options before it do not count), else after the
    program."""
    for i, arg in enumerate(command):
        if arg.endswith(".py"):
            return tuple(command[i + 1:])
        if arg == "-m" and i + 1 < len(command):
            return tuple(command[i + 2:])
    return tuple(command[1:])


def flag_names(key: str) -> tuple[str, ...]:
    """The options a script would read a key from: `--lr` for optim.lr, `--batch_size` and
    `--batch-size` for trainer.batch_size, and the whole key."""
    last = key.rsplit(".", 1)[-1]
    return tuple(dict.fromkeys(f"--{n}" for n in (last, last.replace("_", "-"), key)))


def _literal(command: Sequence[str], key: str) -> tuple[int, int] | None:
    """Where the command sets the key itself, not through `{key}`: (first, last) index of
    `--lr 0.1`, `--lr=0.1` or `lr=0.1`."""
    field = "{" + key + "}"
    flags = flag_names(key)
    for i, arg in enumerate(command[1:], start=1):
        name, eq, value = arg.partition("=")
        if name in flags and not eq and i + 1 < len(command) and field not in command[i + 1]:
            return i, i + 1
        if (name in flags or name == key) and eq and field not in value:
            return i, i
    return None


def _suggested(command: Sequence[str], sweep: Sweep) -> str:
    """The command with each swept value in a placeholder: a literal `--lr 0.1` becomes
    `--lr {lr}`, a key the command does not name gets `--lr {lr}` at the end."""
    words = list(command)
    for key in sweep.keys:
        if "{" + key + "}" in " ".join(words):
            continue
        found = _literal(words, key)
        flag = flag_names(key)[0]
        if found is None:
            words += [flag, "{" + key + "}"]
        elif found[0] == found[1]:
            words[found[0]] = words[found[0]].partition("=")[0] + "={" + key + "}"
        else:
            words[found[1]] = "{" + key + "}"
    return "-- " + " ".join(w if _PLAIN.fullmatch(w) else shlex.quote(w) for w in words)


def check_command(command: Sequence[str], sweep: Sweep) -> tuple[str, ...]:
    """Refuse a command that would not take the point's values, or would take a swept one
    twice (its own literal `--lr 0.1` shadowing or shadowed by the point's); the notes."""
    if tuple(command[:2]) == TRAIN_COMMAND:
        return ()
    for key in sweep.keys:
        found = _literal(command, key)
        if found is not None:
            written = " ".join(command[found[0]:found[1] + 1])
            fix = (f"remove `{written}`: the point's {{{key}}} gives it"
                   if key in placeholders(command) else f"write {_suggested(command, sweep)}")
            raise HpctrainError(f"the command sets {written} itself, and the sweep varies "
                                f"{key}: one of the two values would be lost", fix)
    if placeholders(command):
        check_placeholders(command, sweep)
        return _unplaced(command, sweep)
    args = script_args(command)
    flags = [a for a in args if a.startswith("--") and a.partition("=")[0] not in _HYDRA_FLAGS]
    hydra = [a for a in args if not a.startswith("-") and _KEY.fullmatch(a.partition("=")[0])
             and "=" in a]
    keys = ", ".join("{" + k + "}" for k in sweep.keys)
    if flags and not hydra:
        raise HpctrainError(
            f"the command takes --flags ({flags[0]}) and has no {keys}: each point would "
            f"append {describe(sweep.points[0])} (Hydra's syntax), which an argparse script "
            "refuses",
            f"place each swept value where the command takes it: write "
            f"{_suggested(command, sweep)}")
    if not args:
        return (f"each point's settings are appended to the command as KEY=VALUE "
                f"({describe(sweep.points[0])}, Hydra's syntax); a script with --options "
                f"takes them as placeholders: {_suggested(command, sweep)}",)
    return ()


def _unplaced(command: Sequence[str], sweep: Sweep) -> tuple[str, ...]:
    """Refuse a swept key no placeholder passes on: its points would all run alike."""
    named = placeholders(command)
    missing = [k for k in sweep.keys if k not in named]
    if missing:
        raise HpctrainError(
            f"the sweep varies {', '.join(missing)}, which the command has no placeholder "
            "for: its points would run alike",
            f"write {_suggested(command, sweep)}")
    return ()

"""Every option of every hpctrain command is used by at least one test.

The test walks hpctrain's click command tree and scans the test sources (AST, no imports, no
subprocess) for invocations. An invocation is seen only when the command words and the option
are string literals in ONE sequence, in order:

- the positional arguments of one call:  `cli.ok("submit", "--profile", "local", "--grace", "30")`
- or one list/tuple literal (`+` of literals and `*[...]` inside count as one):
  `runner.invoke(app, ["profiles", "show", "raven", "--json"])`,
  `[sys.executable, "-m", "hpctrain", "data", "fetch", "--to", str(dest)]`.

Both `"--opt", value` and `"--opt=value"` (also `f"--opt={value}"`), short flags (`"-e", "K=V"`,
`"-n5"`, `"-ay"`) are understood. The sequence is parsed as click would: command words descend
the tree (`"profiles", "show"`), an option's value is skipped (so `"--job-name", "--json"` uses
no `--json`), and nothing after `"--"` counts (that is the job's command). A non-literal element
(`str(path)`, `*args`) stands for one unknown token. So a helper that adds the command word
itself (`cli.submit("--grace", "30")`) hides the use: write the command word in the call, or
put the whole invocation in one list. Each side of an on/off pair (`--requeue`, `--no-requeue`)
is an option of its own. A use says nothing about the assert: each use must check the effect.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import typer.main

from hpctrain.cli import app

TESTS = Path(__file__).resolve().parents[1]
Token = str | None  # None: an element that is not a string literal
Use = tuple[tuple[str, ...], str]  # (command path, the option's name)


@dataclass
class Command:
    """One node of the command tree: option spellings -> (name, values it takes)."""

    path: tuple[str, ...]
    options: dict[str, tuple[str, int]] = field(default_factory=dict)
    subcommands: dict[str, Command] = field(default_factory=dict)


def _add_option(node: Command, opt: click.Option) -> None:
    takes = 0 if (opt.is_flag or opt.count) else max(opt.nargs, 1)
    long_first = sorted(opt.opts, key=lambda s: not s.startswith("--"))
    for spelling in opt.opts:
        node.options[spelling] = (long_first[0], takes)
    # The off side of --x/--no-x does something else: it is an option of its own.
    for spelling in opt.secondary_opts:
        node.options[spelling] = (spelling, 0)


def command_tree(cmd: click.Command, path: tuple[str, ...] = ()) -> Command:
    """The click command as a tree of Command nodes (--help left out)."""
    node = Command(path)
    for param in cmd.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            _add_option(node, param)
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            node.subcommands[name] = command_tree(sub, (*path, name))
    return node


def all_options(node: Command) -> set[Use]:
    """Every (command path, option name) of the tree."""
    found = {(node.path, name) for name, _ in node.options.values()}
    for sub in node.subcommands.values():
        found |= all_options(sub)
    return found


def _match(node: Command, token: str) -> tuple[list[str], int] | None:
    """The option names one token uses, and how many following tokens it takes as values."""
    if token.startswith("--"):
        spelling, eq, _ = token.partition("=")
        if spelling not in node.options:
            return None
        name, takes = node.options[spelling]
        return [name], 0 if eq else takes
    if not token.startswith("-") or len(token) < 2:
        return None
    names: list[str] = []
    for i, char in enumerate(token[1:], start=1):
        if f"-{char}" not in node.options:
            return None
        name, takes = node.options[f"-{char}"]
        names.append(name)
        if takes:  # the rest of the token, or the next one, is its value
            return names, 0 if i < len(token) - 1 else takes
    return names, 0


def _parse(root: Command, tokens: list[Token], start: int, uses: set[Use]) -> int:
    """Parse from `start` as click would from the root; return where the parse stopped."""
    node, i = root, start
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            return len(tokens)
        if token is not None and token in node.subcommands:
            node = node.subcommands[token]
        elif token is not None and (hit := _match(node, token)):
            names, skip = hit
            uses.update((node.path, n) for n in names)
            i += skip
        elif node.subcommands:  # a group meets something that is not its command: no parse
            return i
        i += 1
    return i


def uses_in_sequence(root: Command, tokens: list[Token]) -> set[Use]:
    """The uses in one sequence: parses start at its head, after `hpctrain`, or at a command."""
    uses: set[Use] = set()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            break
        if i == 0 or tokens[i - 1] == "hpctrain" or token in root.subcommands:
            stop = _parse(root, tokens, i, uses)
            i = max(stop, i + 1)
        else:
            i += 1
    return uses


def _tokens(node: ast.expr) -> list[Token]:
    """The elements of a list/tuple literal (or `+` of them), flattened."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _tokens(node.left) + _tokens(node.right)
    if isinstance(node, ast.List | ast.Tuple):
        return _elements(node.elts)
    return [None]


def _elements(nodes: Iterable[ast.expr]) -> list[Token]:
    out: list[Token] = []
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.Starred) and isinstance(node.value, ast.List | ast.Tuple):
            out.extend(_elements(node.value.elts))
        elif isinstance(node, ast.JoinedStr) and _option_prefix(node):
            out.append(_option_prefix(node))
        else:
            out.append(None)
    return out


def _option_prefix(node: ast.JoinedStr) -> str | None:
    """f"--opt={value}" -> "--opt=" (the literal part names the option)."""
    first = node.values[0] if node.values else None
    if (isinstance(first, ast.Constant) and isinstance(first.value, str)
            and first.value.startswith("-") and "=" in first.value):
        return first.value
    return None


def sequences(source: str) -> Iterator[list[Token]]:
    """Every call's positional arguments and every list/tuple literal of a module."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            yield _elements(node.args)
        elif isinstance(node, ast.List | ast.Tuple | ast.BinOp):
            yield _tokens(node)


def uses_in_source(root: Command, source: str) -> set[Use]:
    found: set[Use] = set()
    for tokens in sequences(source):
        found |= uses_in_sequence(root, tokens)
    return found


def hpctrain_tree() -> Command:
    return command_tree(typer.main.get_command(app))


def _show(use: Use) -> str:
    path, name = use
    return " ".join(("hpctrain", *path, name))


def test_every_option_of_every_command_is_used_by_a_test() -> None:
    root = hpctrain_tree()
    used: set[Use] = set()
    for file in sorted(TESTS.rglob("*.py")):
        if file.resolve() != Path(__file__).resolve():  # this file's examples are no uses
            used |= uses_in_source(root, file.read_text())
    unused = sorted(all_options(root) - used)
    assert not unused, (f"{len(unused)} options no test uses (see this module's docstring):\n"
                        + "\n".join(_show(u) for u in unused))


# The scanner itself, on snippets: it must see real uses and only those.

def _scan(source: str) -> set[str]:
    return {_show(u) for u in uses_in_source(hpctrain_tree(), source)}


def test_tree_has_every_spelling_and_pairs_split() -> None:
    root = hpctrain_tree()
    render = root.subcommands["render"].options
    assert render["-e"] == render["--env"] == ("--env", 1)
    assert render["--requeue"] == ("--requeue", 0) and render["--no-requeue"] == ("--no-requeue", 0)
    assert "--help" not in render
    assert root.subcommands["profiles"].subcommands["show"].path == ("profiles", "show")


def test_scanner_sees_calls_lists_and_value_forms() -> None:
    source = (
        'cli.ok("submit", "--profile", "local", "--grace=30", "-e", "A=1", "--no-requeue")\n'
        'runner.invoke(app, ["profiles", "show", "raven", "--json"])\n'
        'x = [sys.executable, "-m", "hpctrain", "logs", "-n5", job] + ["--login", host]\n'
        'hp("--debug", "status", f"--last={n}", "-aw")\n'
        'hp("--version")\n'
    )
    assert _scan(source) == {
        "hpctrain submit --profile", "hpctrain submit --grace", "hpctrain submit --env",
        "hpctrain submit --no-requeue", "hpctrain profiles show --json",
        "hpctrain logs --tail", "hpctrain logs --login", "hpctrain --debug",
        "hpctrain status --last", "hpctrain status --all", "hpctrain status --watch",
        "hpctrain --version",
    }


def test_scanner_ignores_what_is_no_use() -> None:
    source = (
        'FLAG = "--python-env"\n'                             # a flag alone
        'assert "--grace" in script\n'                         # in an assert, no command
        'cli.submit("--chain", "2")\n'                         # the command word is hidden
        'cli("render", "-P", "local", "--", "train", "--lr", "1")\n'  # the job's command
        'cli("submit", "--job-name", "--json")\n'              # a value, not an option
        'run(["sinfo", "--version"])\n'                        # another program
        'cli("profiles", "--json")\n'                          # a group, not its command
        'cli("render", "--no-such-option", "--profilex")\n'    # not render's options
    )
    assert _scan(source) == {"hpctrain render --profile", "hpctrain submit --job-name"}

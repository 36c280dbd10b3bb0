"""The hpctrain command line: one typer app (cli/root.py), one error boundary (`main`).

This package's own module imports neither typer nor click: `main` runs a `render` or `submit`
whose command line needs no click parsing without them (cli/argv.py), the app otherwise.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hpctrain.cli.commands import PLAIN, state
from hpctrain.cli.output import err_console, print_json
from hpctrain.errors import HpctrainError
from hpctrain.startup.cycles import without_cycle_search

if TYPE_CHECKING:
    import click

def __getattr__(name: str) -> Any:
    # `hpctrain.cli.app`: the whole app, built on first use (tests drive it with CliRunner);
    # `build_app`, the app's builder.
    if name == "app":
        from hpctrain.cli.root import build_app

        app = build_app()
        globals()["app"] = app
        return app
    if name == "build_app":
        from hpctrain.cli.root import build_app

        return build_app
    raise AttributeError(name)


def main() -> None:
    """Entry point: run the command behind the one error boundary."""
    if "_HPCTRAIN_COMPLETE" in os.environ:
        # The shell asks for completions (the script of `hpctrain completion SHELL`).
        from hpctrain.cli.completion import complete
        from hpctrain.cli.root import build_app

        sys.exit(complete(build_app))
    try:
        code = _run(sys.argv[1:])
        if isinstance(code, int) and code:
            sys.exit(code)
    except HpctrainError as e:
        if state["debug"]:
            raise
        _print_error(e.what, e.fix)
        if _json_asked(sys.argv[1:]) and not e.shown_in_json:
            # A script reads stdout: the failure as JSON too, in one shape for every command.
            print_json({"error": {"what": e.what, "fix": e.fix}})
        # A safe stop of `hpctrain train` ends 75 (EX_TEMPFAIL), as the trainer does in a job.
        sys.exit(getattr(e, "exit_code", 1))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(1)
    except Exception as e:  # click usage errors, typer.Exit and Abort, and the like
        _other_error(e)


def _run(args: list[str]) -> Any:
    """The command `args` name: a plain `render` or `submit` parsed from the option tables
    without click (typer and click are a third of their start-up), else by the typer app."""
    if args[:1] and args[0] in PLAIN:
        state["debug"] = False  # as the root's callback sets it: no root option came first
        # The cycle search ran 40 times in a submit's imports (4 ms of 85) and found nothing
        # to free; both commands are short and make few objects.
        with without_cycle_search():
            module = importlib.import_module(f"hpctrain.cli.{args[0]}")
            if module.run_plain(args[1:]):
                return 0
    from hpctrain.cli.root import build_app

    # Without standalone mode click returns the exit code of typer.Exit instead of raising.
    return build_app(args)(standalone_mode=False)


def _json_asked(args: Sequence[str]) -> bool:
    # After `--` the words are the job's command, whose own --json is not ours.
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def _print_error(what: str, fix: str | None) -> None:
    # Escaped: a path such as "runs[/x]" is text, not rich markup (which could even raise).
    from rich.markup import escape

    err_console.print(f"[bold red]Error:[/] {escape(what)}", highlight=False, markup=True)
    if fix:
        err_console.print(f"  [bold]Fix:[/] {escape(fix)}", highlight=False)


def _other_error(e: Exception) -> None:
    import click

    if isinstance(e, click.exceptions.ClickException):
        if "Did you mean" in e.message:
            # typer writes its suggestion into the message; click (8.4 on) would add its own.
            e.__dict__["possibilities"] = None
        e.show()
        if isinstance(e, click.exceptions.NoSuchOption):
            _option_hint(e)
        fix = None
        if isinstance(e, click.exceptions.MissingParameter) and getattr(
                e.param, "name", None) == "profile":
            fix = _profile_hint()
            err_console.print(f"  Fix: {fix}", highlight=False, markup=False)
        if _json_asked(sys.argv[1:]):
            # A usage error (exit 2) under --json: a script reads JSON here too.
            from hpctrain.cli.output import print_json

            print_json({"error": {"what": e.format_message(), "fix": fix or "see `hpctrain "
                                  f"{_command_words(e)}--help`"}})
        sys.exit(e.exit_code)
    if isinstance(e, click.exceptions.Exit):
        sys.exit(e.exit_code)
    if isinstance(e, click.exceptions.Abort):
        err_console.print("Aborted.")
        sys.exit(1)
    if state["debug"]:
        raise e
    # Whatever the input, no traceback without --debug: a bug still gets an Error: line.
    detail = str(e).splitlines()[0][:200] if str(e) else ""
    _print_error(
        f"unexpected {type(e).__name__}" + (f": {detail}" if detail else ""),
        "this is a bug in hpctrain; run the command again with --debug and report the traceback",
    )
    sys.exit(1)


def _command_words(e: click.ClickException) -> str:
    """`profiles show ` for an error in that command (the root's own name left out: it is
    `-m hpctrain` under python -m)."""
    words: list[str] = []
    ctx = getattr(e, "ctx", None)
    while ctx is not None and ctx.parent is not None:
        words.insert(0, f"{ctx.info_name} ")
        ctx = ctx.parent
    return "".join(words)


def _option_hint(e: click.exceptions.NoSuchOption) -> None:
    # sbatch users type sbatch's options: name hpctrain's spelling, or --sbatch-arg.
    from hpctrain.cli.habits import hint

    command = e.ctx.command if e.ctx is not None else None
    takes = any(p.name == "sbatch_arg" for p in getattr(command, "params", ()))
    name = e.ctx.info_name if e.ctx is not None and e.ctx.parent is not None else None
    err_console.print(f"  Fix: {hint(e.option_name, name, takes)}", highlight=False,
                      markup=False)


def _profile_hint() -> str:
    # A newcomer does not know the names yet: list them where the option is missing.
    from hpctrain.profiles.loader import list_profiles

    names = ", ".join(p.name for p in list_profiles())
    return f"give --profile NAME (or -P NAME), one of: {names}; or a profile's YAML file"


def _quiet_stdout() -> None:
    # The reader of a pipe (`| head`) has gone; Python's final flush must not complain.
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())

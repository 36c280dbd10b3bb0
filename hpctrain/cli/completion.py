"""Shell completion: `hpctrain completion bash|zsh|fish` prints the script; the values
completed (profiles, partitions, job ids from the history) are looked up only when asked.

Imported by options.py for every job command, so nothing heavy at module level.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    import typer

PROG = "hpctrain"
COMPLETE_VAR = "_HPCTRAIN_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
# The commands whose argument is a job id of the history, and that argument's name.
JOB_ARGUMENTS = {"status": "job_ids", "logs": "job_id", "cancel": "job_ids", "why": "job"}

Item = tuple[str, str]


def profile_names(incomplete: str) -> list[Item]:
    """Profiles by name, user ones first where they shadow shipped ones."""
    from hpctrain.profiles.loader import list_profiles

    return [(p.name, p.source) for p in list_profiles() if p.name.startswith(incomplete)]


def partition_names(ctx: Any, incomplete: str) -> list[Item]:
    """The chosen profile's partitions, or every profile's when none is chosen yet."""
    from hpctrain.profiles.loader import list_profiles, load_profile

    chosen = (ctx.params or {}).get("profile") if ctx is not None else None
    names = [chosen] if chosen else [p.name for p in list_profiles()]
    found: dict[str, str] = {}
    for name in names:
        try:
            profile = load_profile(name)
        except HpctrainError:
            continue  # a broken profile completes nothing; the command itself says why
        for part in profile.partitions:
            found.setdefault(part.name, profile.name)
    return [(name, prof) for name, prof in sorted(found.items()) if name.startswith(incomplete)]


def launcher_names(incomplete: str) -> list[Item]:
    """The launchers, each with the program it is for."""
    from hpctrain.plan.launchers import LAUNCHERS

    return [(m.name, f"if {m.program}") for m in LAUNCHERS.values()
            if m.name.startswith(incomplete)]


def task_names(incomplete: str) -> list[Item]:
    """The packaged trainer's tasks, with their summaries."""
    from hpctrain.tasks import registry

    return [(t.name, t.summary) for t in registry.all_tasks().values()
            if t.name.startswith(incomplete)]


def job_ids(incomplete: str) -> list[Item]:
    """SLURM job ids of the history, newest first."""
    from hpctrain.history import History

    history = History()
    if not history.exists():
        return []
    try:
        rows = history.recent(50)
    except HpctrainError:
        return []
    return [(r.job_id, f"{r.job_name} {r.state}") for r in reversed(rows)
            if r.job_id.startswith(incomplete)]


def _init() -> None:
    # typer's classes read COMP_WORDS (bash) and _TYPER_COMPLETE_ARGS (zsh, fish), and their
    # scripts send `complete_bash`, as typer's instruction style has it.
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: str) -> str:
    """The completion script `shell` sources."""
    import click.shell_completion

    _init()
    cls = click.shell_completion.get_completion_class(shell)
    if shell not in SHELLS or cls is None:
        raise HpctrainError(f"no completion for shell {shell!r}", f"choose {', '.join(SHELLS)}")
    # The script only names the program and variable; it needs no command tree.
    return cls(None, {}, PROG, COMPLETE_VAR).source()  # type: ignore[arg-type]


def complete(build: Callable[[list[str]], typer.Typer]) -> int:
    """Answer one completion request from the shell (COMPLETE_VAR is set); the exit code."""
    import click.shell_completion
    import typer.main

    _init()
    shell = os.environ[COMPLETE_VAR].partition("_")[2]
    cls = click.shell_completion.get_completion_class(shell)
    # The words before the one being completed pick the command module, as for a command.
    words = cls(None, {}, PROG, COMPLETE_VAR).get_completion_args()[0] if cls else []  # type: ignore[arg-type]
    group = typer.main.get_command(build(list(words)))
    _attach(group)
    try:
        group.main(args=[], prog_name=PROG, complete_var=COMPLETE_VAR)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0
    return 0


Values = Callable[[str], list[Item]]


def _late_completions(commands: Any) -> dict[tuple[str, str], Values]:
    """(command, parameter) -> its values, for parameters whose modules declare none: job ids
    from the history."""
    return {(name, arg): job_ids for name, arg in JOB_ARGUMENTS.items() if name in commands}


def _attach(group: Any) -> None:
    """Give the built commands' parameters of `_late_completions` their completion."""
    for (name, arg), values in _late_completions(group.commands).items():
        command = group.commands.get(name)
        for param in getattr(command, "params", ()):
            if param.name == arg:
                # click's hook for a parameter's own completion (shell_complete= at creation);
                # set here so the commands' modules need no completion code.
                param._custom_shell_complete = functools.partial(_items, values)


def _items(values: Values, ctx: Any, param: Any, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(v, help=h or None) for v, h in values(incomplete)]


def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(hpctrain completion bash)" in ~/.bashrc."""
    sys.stdout.write(script(shell).rstrip("\n") + "\n")


def register(app: typer.Typer) -> None:
    import typer

    # Declared here: options.py imports this module for every job command, typer or not.
    shell = Annotated[str, typer.Argument(help="bash, zsh or fish.", metavar="SHELL",
                                          autocompletion=lambda: list(SHELLS))]
    completion.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("shell", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=shell)])
    completion.__annotations__ = {"shell": shell, "return": None}
    app.command(help=(
        "Print the shell completion script for bash, zsh or fish: completes commands, "
        "options, profiles, partitions and job ids.\n\nbash: eval \"$(hpctrain completion "
        "bash)\" in ~/.bashrc; zsh: eval \"$(hpctrain completion zsh)\" in ~/.zshrc; fish: "
        "hpctrain completion fish > ~/.config/fish/completions/hpctrain.fish"
    ), epilog='Example: echo \'eval "$(hpctrain completion bash)"\' >> ~/.bashrc')(completion)

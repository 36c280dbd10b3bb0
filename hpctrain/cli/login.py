"""`hpctrain login NAME`: open (or check, or close) the one ssh connection to a login node."""

from __future__ import annotations

from typing import Annotated

import typer

from hpctrain.cli.flags import LOGIN, JsonOpt
from hpctrain.cli.output import console, err_console, print_json

# Every command that can go through a login takes it so (status imports it from here rather
# than from the job-option table, which costs it the trainer's options).
LoginOpt = Annotated[str | None, LOGIN.declaration()]


def login(
    name: Annotated[str, typer.Argument(
        help="A profile with a login: section, or an ssh destination (raven, me@host).")],
    ssh_config: Annotated[str | None, typer.Option(
        "--ssh-config", metavar="FILE", help="ssh config file instead of ~/.ssh/config.")] = None,
    persist: Annotated[str, typer.Option(
        help="How long the connection stays open while unused (ssh ControlPersist: 8h, "
        "30m, yes = until `--close`).")] = "8h",
    check: Annotated[bool, typer.Option(
        "--check", help="Only say whether the connection is open (exit 1 if not).")] = False,
    close: Annotated[bool, typer.Option("--close", help="Close the connection.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Open the one ssh connection later commands reuse (your password or OTP, asked once)."""
    from hpctrain.errors import HpctrainError
    from hpctrain.places.connections import for_name, login_state, open_login
    from hpctrain.remote.connection import check_persist

    if check and close:
        raise HpctrainError("--check and --close do not mix", "pass one of them")
    check_persist(persist)
    conn = for_name(name, ssh_config)
    host = conn.target.host
    if check or close:
        state = login_state(conn, close)
        was_open = bool(state["open"] or state["closed"])
        if json_out:
            print_json(state)
        elif close:
            console.print(f"closed the connection to {host}" if was_open
                          else f"no connection to {host} was open", highlight=False)
        elif was_open:
            console.print(f"connection to {host} is open ({conn.socket})", highlight=False)
        if check and not was_open:
            conn.require()
        return
    summary = open_login(conn, persist)
    if json_out:
        print_json(summary)
        return
    what = "opened" if summary["opened"] else "already open:"
    console.print(f"{what} connection to {host} (SLURM cluster {summary['cluster'] or '?'}, "
                  f"user {summary['remote_user']}); it closes after {persist} unused",
                  highlight=False)
    err_console.print(f"later commands reuse it: hpctrain submit/status/logs/cancel ... "
                      f"(close it with `hpctrain login {conn.name} --close`)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add login to the root app."""
    app.command(epilog="Example: hpctrain login raven")(login)

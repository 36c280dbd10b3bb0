"""The ssh master against a real sshd on loopback: one connection, a fast clear error when it
is gone, and hostile destinations or paths that execute nothing."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hpctrain.errors import RemoteError
from hpctrain.remote.connection import (
    CHECK_TIMEOUT_S,
    batch_script,
    check_destination,
    parse_batch,
    shell_command,
)
from tests.remote.conftest import Laptop, Sshd
from tests.waits import assert_prompt, timed

HOSTILE = [
    "-oProxyCommand=touch {m}",
    "-F{m}",
    "testlogin;touch {m}",
    "$(touch {m})",
    "`touch {m}`",
    "test login",
    "'testlogin'",
    'x"; touch {m}; "',
    "testlogin\ntouch {m}",
    "",
]


def _master_pid(lap: Laptop) -> int:
    res = lap.ok("login", "remote", "--check", "--json")
    socket = __import__("json").loads(res.stdout)["socket"]
    out = subprocess.run(["ssh", "-S", socket, "-O", "check", "x"], capture_output=True,
                         text=True, check=False)
    match = re.search(r"pid=(\d+)", out.stderr)
    assert match, out.stderr
    return int(match.group(1))


def _record_job(lap: Laptop, sshd: Sshd) -> None:
    """A job in the laptop's history as if submitted through the login (a real history row)."""
    from hpctrain.history import History, NewJob

    History(lap.home / "state" / "history.sqlite3").add(NewJob(
        job_id="4242", cluster="hpctrain-dev", profile="remote", job_name="j", partition=None,
        nodes=1, gpus_per_node=0, total_gpus=0, command=["true"], run_dir="/nowhere",
        script_path=None, stdout_path="/nowhere/out", stderr_path=None, workdir="/nowhere",
        git_commit=None, git_dirty=None, login=sshd.host,
        login_config=str(sshd.client_config)))


def test_destination_check_refuses_options_and_shell_words() -> None:
    for dest in ("raven", "me@raven.mpcdf.mpg.de", "ssh://me@host:2222", "[::1]", "a_b-c.d"):
        assert check_destination(dest) == dest
    for dest in HOSTILE:
        with pytest.raises(RemoteError):
            check_destination(dest.format(m="/tmp/x"))


def test_shell_command_and_batch_keep_every_word_whole(tmp_path: Path) -> None:
    odd = tmp_path / "a b 'c' \"d\" $(touch pwned) ;e"
    odd.mkdir()
    line = shell_command(["sh", "-c", 'printf "%s|" "$@"', "-", "x y", "'q'", "$(id)"],
                         cwd=str(odd))
    script = batch_script([line, "pwd", "echo err >&2; exit 3"])
    out = subprocess.run(["sh", "-c", script], capture_output=True, check=True,
                         cwd=tmp_path).stdout
    first, second, third = parse_batch(b"banner from a login script\n" + out, 3)
    assert first == ("x y|'q'|$(id)|", "", 0)
    assert second == (f"{tmp_path}\n", "", 0)
    assert third == ("", "err\n", 3)
    assert not (tmp_path / "pwned").exists() and not (odd / "pwned").exists()


def test_ten_commands_one_connection_and_clear_error_when_master_dies(
    sshd: Sshd, laptop: Callable[..., Laptop]
) -> None:
    lap = laptop(str(sshd.remote_home / "work dir"))
    before = sshd.connections()
    lap.ok("login", "remote")
    assert sshd.connections() == before + 1
    # The baseline: the same commands through a live master, on this machine under its load.
    live: list[float] = []
    for _ in range(5):
        live.append(timed(lap.ok, "login", "remote", "--check")[1])
        res, took = timed(lap.ok, "submit", "--profile", "remote", "--dry-run", "--json", "--",
                          "true")
        live.append(took)
        assert str(sshd.remote_home / "work dir") in res.stdout
    assert sshd.connections() == before + 1, "every command must reuse the master"

    _record_job(lap, sshd)
    os.kill(_master_pid(lap), 15)
    for args in (("submit", "--profile", "remote", "--", "true"),
                 ("submit", "--profile", "remote", "--dry-run", "--", "true"),
                 ("status",), ("logs", "-f", "4242"), ("cancel", "4242"),
                 ("login", "remote", "--check")):
        res, took = timed(lap, *args)
        assert res.returncode == 1, res.stderr
        assert "no open ssh connection to testlogin: the connection expired" in res.stderr
        assert "run `hpctrain login remote`" in res.stderr and "Traceback" not in res.stderr
        if args == ("status",):
            assert "4242" in res.stdout  # the last known state is still shown
        # At once: no longer than a live call, give or take the load, plus the one wait the
        # code allows itself (`ssh -O check`), never a remote command's or ssh's own timeout.
        assert_prompt(took, max(live), " ".join(args), plus_s=CHECK_TIMEOUT_S)
    assert sshd.connections() == before + 1, "no command may open a connection of its own"


def test_hostile_destinations_execute_nothing(
    sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    lap = laptop(str(sshd.remote_home / "w"))
    for i, template in enumerate(HOSTILE):
        dest = template.format(m=marker)
        commands: list[tuple[str, ...]] = [
            ("submit", "--profile", "remote", "--login", dest, "--", "true")]
        if i % 3 == 0:
            commands += [("status", "--login", dest), ("cancel", "--all", "--yes", "--login", dest),
                         ("login", "--", dest)]
        for args in commands:
            res = lap(*args)
            assert res.returncode != 0, (args, res.stdout)
            assert "Error:" in res.stderr and "Traceback" not in res.stderr, res.stderr
    for template in HOSTILE[:3]:
        bad = laptop(str(sshd.remote_home / "w"), host=template.format(m=marker))
        res = bad("submit", "--profile", "remote", "--", "true")
        assert res.returncode == 1 and "Error:" in res.stderr, res.stderr
    assert not marker.exists()
    assert sshd.connections() == 0

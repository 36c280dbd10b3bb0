"""A newcomer's first hour (issue 30): render refuses what submit refuses, scale plans every
topology before it submits one, output survives a terminal's copy and a pipe, and every
command's --json says why it failed."""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main

from tests.unit.inproc import Cli, in_process

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(monkeypatch, capsys)


# Point 4: render checks what submit checks; scale is all or nothing, as --first-of.

def test_render_refuses_a_missing_or_misspelt_config_as_submit_does(cli: Cli,
                                                                     tmp_path: Path) -> None:
    (tmp_path / "typo.yaml").write_text("trainer:\n  max_epoch: 3\n")
    for word in ("render", "submit"):
        extra = ["--dry-run"] if word == "submit" else []
        r = cli(word, "--profile", "local", "--config", "missing.yaml", *extra)
        assert r.code == 1 and "--config missing.yaml does not exist" in r.err, (word, r.err)
        assert r.out == ""
        r = cli(word, "--profile", "local", "--config", "typo.yaml", *extra)
        assert r.code == 1 and "trainer.max_epoch: unknown field" in r.err, (word, r.err)
        assert r.out == ""


def test_scale_plans_every_topology_before_submitting_any(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpctrain.submission.scaling_study import StudySubmission

    submitted: list[Any] = []
    monkeypatch.setattr(StudySubmission, "submit_run", lambda self, *a, **k: submitted.append(a))
    # The local profile has 4 nodes of 2 GPUs: 1x1 fits, 64x1 and 1x64 do not.
    r = cli("scale", "--profile", "local", "--topologies", "1x1,64x1,1x64", "--task", "spiral",
            "--json")
    assert r.code == 1, (r.out, r.err)
    assert "64x1: " in r.err and "1x64: " in r.err and "1x1:" not in r.err
    assert "every topology must be possible" in r.err
    assert "64x1: " in json.loads(r.out)["error"]["what"]
    assert submitted == []
    # Nothing recorded: no study, no run directory.
    assert "no scaling study yet" in cli("scale-report").err
    assert not (Path.cwd() / "hpctrain-runs").exists()


# Point 5: output that survives copy and pipe.

def _on_terminal(args: list[str], columns: int, cwd: Path) -> tuple[str, str]:
    """`hpctrain ARGS` with stdout on a pseudo-terminal this wide: (the screen, stderr)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "hpctrain", *args], stdin=follower,
                            stdout=follower, stderr=subprocess.PIPE, cwd=cwd,
                            env={**env, "TERM": "xterm-256color"})
    os.close(follower)
    screen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        assert ready, "no output within 30 s"
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the follower side closed with the process
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return ANSI.sub("", screen.decode()).replace("\r\n", "\n"), err.decode()


def test_a_script_copied_from_an_80_column_terminal_passes_bash_n(tmp_path: Path) -> None:
    screen, _ = _on_terminal(["render", "--profile", "raven", "--nodes", "2"], 80, tmp_path)
    script = screen[screen.index("#!/bin/bash"):]
    assert max(len(line) for line in script.splitlines()) > 80  # the case that used to fold
    (tmp_path / "copied.sh").write_text(script)
    checked = subprocess.run(["bash", "-n", str(tmp_path / "copied.sh")], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stderr
    rendered = subprocess.run([sys.executable, "-m", "hpctrain", "render", "--profile", "raven",
                               "--nodes", "2"], capture_output=True, text=True, cwd=tmp_path)
    # Line for line the script a pipe gets (a terminal may pad a line's end).
    assert [ln.rstrip() for ln in script.splitlines()] == [
        ln.rstrip() for ln in rendered.stdout.splitlines()]


def test_a_piped_render_keeps_its_summary_and_notes_on_stderr(cli: Cli) -> None:
    r = cli("render", "--profile", "local", "--nodes", "2", "--global-batch", "64")
    assert r.code == 0, r.err
    assert r.out.startswith("#!/bin/bash") and "note:" not in r.out
    first, *notes = r.err.splitlines()
    assert first.startswith("local (") and "2 node(s)" in first and "= 4" in first
    assert notes[0] == ("note: global batch 64 = 16 per device x 4 device(s) x 1 accumulated "
                        "step(s)")
    # Plain sbatch of this script needs its log folder made first (none exists here).
    assert notes[1:] == [] or notes[1].startswith("note: SLURM writes the job's output into")


def test_profiles_list_piped_is_plain_aligned_columns(cli: Cli) -> None:
    r = cli("profiles", "list")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "PARTITIONS", "DESCRIPTION"]
    assert not set("│┃━─┏┗") & set(r.out)
    names = {line.split()[0] for line in lines[1:]}
    assert {"raven", "gilbreth", "marvin", "local"} <= names
    assert len(lines) == 1 + len(names)  # one line a profile, however long its description
    # Aligned: every row's description starts in the header's column.
    start = lines[0].index("DESCRIPTION")
    assert all(line[start - 2:start] == "  " and line[start] != " " for line in lines[1:])


def test_a_long_job_name_stays_on_one_line_in_status() -> None:
    from rich.console import Console

    from hpctrain.cli.jobview import table
    from hpctrain.history import JobRecord

    name = "a-rather-long-experiment-name-for-the-sweep-over-learning-rates"
    rec = JobRecord(job_id="123", cluster="c", profile="raven", job_name=name, partition="gpu",
                    nodes=2, gpus_per_node=4, total_gpus=8, command=[], run_dir=None,
                    script_path=None, stdout_path=None, stderr_path=None, workdir="/w",
                    git_commit=None, git_dirty=None, time_limit_s=3600, id=1,
                    submitted_at="2026-01-01T00:00:00Z", state="RUNNING", slurm_state="RUNNING",
                    exit_code=None, signal=None, reason=None, node_list="r[1-2]",
                    elapsed_s=60, updated_at=None, terminal=False, stale=False)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table([rec]))
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2, out.getvalue()  # the header and the job's one row
    assert "a-rather-long" in lines[1] and "…" in lines[1] and "RUNNING" in lines[1]


# Point 7: --json on failure, and one shape for render.

# A failing call per command (an unknown profile, job, study or file): no cluster needed.
FAILING: dict[tuple[str, ...], list[str]] = {
    ("render",): ["render", "--profile", "nope", "--json"],
    ("submit",): ["submit", "--profile", "nope", "--dry-run", "--json"],
    ("status",): ["status", "99999", "--json"],
    ("cancel",): ["cancel", "99999", "--json"],
    ("why",): ["why", "99999", "--json"],
    ("nodes",): ["nodes", "--clear", "node1", "--clear-all", "--json"],
    ("free",): ["free", "--profile", "nope", "--json"],
    ("diff",): ["diff", "99999", "99998", "--json"],
    ("rerun",): ["rerun", "99999", "--json"],
    ("dev",): ["dev", "--profile", "nope", "--dry-run", "--json"],
    ("login",): ["login", "nope", "--ssh-config", "no/config", "--json"],
    ("stats",): ["stats", "99999", "--json"],
    ("scale",): ["scale", "--profile", "nope", "--topologies", "1x1", "--json"],
    ("scale-report",): ["scale-report", "nope", "--json"],
    ("sweep",): ["sweep", "--profile", "nope", "--grid", "a=1,2", "--json"],
    ("sweep-report",): ["sweep-report", "nope", "--json"],
    ("profiles", "show"): ["profiles", "show", "nope", "--json"],
    ("profiles", "validate"): ["profiles", "validate", "nope.yaml", "--json"],
    ("profiles", "discover"): ["profiles", "discover", "bad/name", "--json"],
    ("profiles", "check"): ["profiles", "check", "nope", "--json"],
    ("profiles", "probe"): ["profiles", "probe", "nope", "--json"],
    ("data", "fetch"): ["data", "fetch", "nope", "--json"],
}
# A succeeding call where one needs no cluster.
SUCCEEDING: dict[tuple[str, ...], list[str]] = {
    ("render",): ["render", "--profile", "local", "--json"],
    ("status",): ["status", "--json"],
    ("gc",): ["gc", "--dry-run", "--json"],
    ("profiles", "list"): ["profiles", "list", "--json"],
    ("profiles", "show"): ["profiles", "show", "local", "--json"],
}
# No input makes these fail without a cluster; the dev cluster's own commands act on the one
# cluster of this machine, which other tests share.
NOT_FAILING = {("gc",), ("profiles", "list"), ("devcluster", "up"), ("devcluster", "status"),
               ("devcluster", "down")}


def _json_commands(cmd: click.Command, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(cmd, click.Group):
        return set().union(*(_json_commands(sub, (*path, name))
                             for name, sub in cmd.commands.items()))
    has = any(isinstance(p, click.Option) and "--json" in p.opts for p in cmd.params)
    return {path} if has else set()


def test_every_json_command_says_why_it_failed_in_json(cli: Cli) -> None:
    from hpctrain.cli import app

    commands = _json_commands(typer.main.get_command(app))
    assert commands == set(FAILING) | NOT_FAILING, "list the new command's failing call"
    for path, args in FAILING.items():
        r = cli(*args)
        assert r.code == 1, (path, r.code, r.err)
        data = json.loads(r.out)
        assert set(data["error"]) == {"what", "fix"} and data["error"]["what"], (path, data)
        assert "Error: " in r.err, (path, r.err)  # people still read stderr
    for path, args in SUCCEEDING.items():
        r = cli(*args)
        assert r.code == 0, (path, r.err)
        assert "error" not in json.loads(r.out) or path == ("profiles", "list"), path


def test_render_json_has_one_shape_with_or_without_first_of(cli: Cli) -> None:
    one = json.loads(cli("render", "--profile", "local", "--json").out)
    race = json.loads(cli("render", "--profile", "local", "--first-of", "1x2,2x1",
                          "--json").out)
    assert set(one) == set(race) == {"first_of", "written_to", "alternatives"}
    assert one["first_of"] is None and race["first_of"] == "1x2,2x1"
    assert len(one["alternatives"]) == 1 and len(race["alternatives"]) == 2
    keys = {"topology", "plan", "script", "check"}
    assert all(set(a) == keys for a in one["alternatives"] + race["alternatives"])
    assert one["alternatives"][0]["topology"] is None
    assert one["alternatives"][0]["script"].startswith("#!/bin/bash")


@pytest.mark.parametrize(("args", "said"), [(["status", "--last", "x", "--json"], "'x'"),
                                            (["render", "--profile", "raven", "--bogus",
                                              "--json"], "--bogus")])
def test_a_usage_error_under_json_is_json_too(args: list[str], said: str, tmp_path: Path
                                              ) -> None:
    """Exit 2 (click's usage error), click's text on stderr, and the error object on stdout."""
    res = subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=tmp_path,
                         env={**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")},
                         capture_output=True, text=True, check=False)
    assert res.returncode == 2 and "Usage:" in res.stderr
    error = json.loads(res.stdout)["error"]
    assert said in error["what"]
    assert error["fix"] == f"see `hpctrain {args[0]} --help`"

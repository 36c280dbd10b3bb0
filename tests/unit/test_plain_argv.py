"""`render`'s and `submit`'s command lines read without click (hpctrain/cli/argv.py): the same
values as the typer app for every command line it takes, and click's answer for the rest; no
typer imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpctrain.cli import render as render_cli
from hpctrain.cli import submit as submit_cli
from hpctrain.cli.root import build_app

TAKEN = [
    ["-P", "raven", "-N", "2"],
    ["--profile=raven", "--nodes=2", "--dry-run"],
    ["-P", "local", "--env", "A=1", "-e", "B=2 c", "--sbatch-arg=--mail-type=END", "--no-requeue",
     "--no-monitor", "--monitor-interval", "5", "--first-of", "1x4,4x1", "--json", "-o",
     "out.sh", "--force", "--check", "--", "python", "train.py", "--lr", "1"],
    ["-P", "raven", "python", "x.py", "-N", "3", "--", "y"],
    ["-P", "raven", "--task", "spiral", "--set", "a=1", "--set", "b=2", "--max-epochs", "3",
     "--config", "my.yaml", "--global-batch", "64", "--max-device-batch", "8"],
    ["-P", "raven", "-N", "2", "-N", "3", "--requeue", "--no-requeue", "--requeue"],
    ["-P", "raven", "--gpus", "8", "--ignore-quarantine", "--stall-window", "off"],
    ["-P", "raven", "--time", "1:00:00", "-A", "lab", "-J", "my job; $(x)", "-C", "gpu-bw",
     "-p", "gpu", "--qos", "q", "--mem", "120G", "--cpus-per-task", "4", "--gpus-per-node",
     "2", "--launcher", "torchrun", "--python-env", "none", "--grace", "60", "--retries", "0",
     "--on-stall", "report", "--monitor"],
    ["-P", "raven", "--", "--weird", "-N"],
    ["-P", "raven", "-"],
    ["-P", "raven", "--output", "-"],
    ["-t", "5", "-P", "raven"],
    ["-P", "raven", "--sbatch-arg", "--mail-type=END", "-J", "-x"],
]
LEFT_TO_CLICK = [
    ["--help"], ["-P", "raven", "-h"], ["-P", "raven", "--bogus"], ["-P", "raven", "-N", "x"],
    ["-P", "raven", "-N", "-1"], ["-P", "raven", "--monitor-interval", "0"], ["-Praven"],
    ["-P"], ["-P", "raven", "--dry-run=1"], ["-P", "raven", "--nod", "2"],
    ["-P", "raven", "-N", "+2"],
    ["-P", "raven", "-o", ""], ["-P", "raven", "-N", "٣"], [], ["-N", "2"],
    ["-N", "2", "--", "python", "x.py"], ["-P", "raven", "-N", "9" * 5000],
]


# submit's own options on top of the job's.
SUBMIT_TAKEN = [
    ["-P", "local", "--chain", "3", "--after", "1,2", "--login", "me@host", "--no-snapshot",
     "--dry-run", "--json", "--", "hostname"],
    ["-P", "local", "--in-place", "data", "--in-place", "more data", "--snapshot",
     "--first-of", "1x1,2x1", "python", "x.py"],
    ["-P", "local", "--chain", "0"],
]
SUBMIT_LEFT = [["-P", "local", "--chain", "x"], ["-P", "local", "--in-place"],
               ["-P", "local", "--snapshot=no"], ["submit"]]
COMMANDS = {"render": (render_cli, "render_job"), "submit": (submit_cli, "submit")}


def _recorder(command: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    got: dict[str, Any] = {}
    module, body = COMMANDS[command]
    monkeypatch.setattr(module, body, lambda job, **own: got.update(job=job, own=own))
    return got


def _id(value: Any) -> str:
    return " ".join(value)[:60] if isinstance(value, list) else str(value)


@pytest.mark.parametrize(("command", "args"), [
    *(("render", a) for a in TAKEN),
    *(("submit", a) for a in [*TAKEN[:2], *SUBMIT_TAKEN])], ids=_id)
def test_a_plain_command_line_gets_what_click_gives(command: str, args: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    got = _recorder(command, monkeypatch)
    build_app([command])([command, *args], standalone_mode=False, prog_name="hpctrain")
    by_click = dict(got)
    got.clear()
    assert COMMANDS[command][0].run_plain(args)
    assert got == by_click


@pytest.mark.parametrize(("command", "args"), [
    *(("render", a) for a in LEFT_TO_CLICK), *(("submit", a) for a in SUBMIT_LEFT),
    ("render", ["-P", "local", "--chain", "2"])], ids=_id)
def test_what_the_plain_reader_does_not_take_is_left_to_click(
        command: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    got = _recorder(command, monkeypatch)
    assert not COMMANDS[command][0].run_plain(args)
    assert got == {}


# A piped render imports none of them; a dry run's summary table is rich's.
@pytest.mark.parametrize(("words", "imported"), [
    (["render", "-P", "raven", "-N", "2"], "[]"),
    (["submit", "-P", "local", "--dry-run", "--", "hostname"], "['rich']")], ids=_id)
def test_a_plain_command_imports_neither_typer_nor_click(tmp_path: Path, words: list[str],
                                                         imported: str) -> None:
    probe = (f"import sys; sys.argv = ['hpctrain', *{words!r}]\n"
             "from hpctrain.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('typer', 'click', 'jinja2', 'rich') "
             "if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"HPCTRAIN_HOME": str(tmp_path),
                                                      "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "#!/bin/bash" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == imported


def test_the_cycle_search_is_off_for_a_plain_command_and_as_it_was_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from hpctrain.cli import _run

    seen: list[bool] = []
    monkeypatch.setattr(render_cli, "run_plain", lambda args: seen.append(gc.isenabled()) or True)
    monkeypatch.chdir(tmp_path)
    assert gc.isenabled()
    assert _run(["render", "-P", "raven"]) == 0
    assert seen == [False] and gc.isenabled()
    monkeypatch.setattr(render_cli, "run_plain", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _run(["render", "-P", "raven"])
    assert gc.isenabled()
    gc.disable()
    try:
        monkeypatch.setattr(render_cli, "run_plain", lambda args: True)
        _run(["render", "-P", "raven"])
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()

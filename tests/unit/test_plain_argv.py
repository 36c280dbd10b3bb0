"""`render`'s command line read without click (hpctrain/cli/argv.py): the same values as the typer
app for every command line it takes, and click's answer for the rest; no typer imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hpctrain.cli import render as render_cli
from hpctrain.cli.app import build_app

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


def _recorder(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    got: dict[str, Any] = {}
    monkeypatch.setattr(render_cli, "render_job", lambda job, **own: got.update(job=job, own=own))
    return got


@pytest.mark.parametrize("args", TAKEN, ids=" ".join)
def test_a_plain_command_line_gets_what_click_gives(args: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    got = _recorder(monkeypatch)
    build_app(["render"])(["render", *args], standalone_mode=False, prog_name="hpctrain")
    by_click = dict(got)
    got.clear()
    assert render_cli.run_plain(args)
    assert got == by_click


@pytest.mark.parametrize("args", LEFT_TO_CLICK, ids=lambda a: " ".join(a)[:40])
def test_what_the_plain_reader_does_not_take_is_left_to_click(
        args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    got = _recorder(monkeypatch)
    assert not render_cli.run_plain(args)
    assert got == {}


def test_a_plain_render_imports_neither_typer_nor_click(tmp_path: Path) -> None:
    probe = ("import sys; sys.argv = ['hpctrain', 'render', '-P', 'raven', '-N', '2']\n"
             "from hpctrain.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('typer', 'click', 'jinja2', 'rich') "
             "if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"HPCTRAIN_HOME": str(tmp_path),
                                                      "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("#!/bin/bash")
    assert done.stderr.strip().splitlines()[-1] == "[]"

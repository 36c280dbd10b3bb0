"""`dev` plans a request as `submit` does (issue 55), and `--restarts` reaches the plan and the
script from render, submit and sweep alike (issue 54): each option is given to both and the
plans (or the refusals) compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.inproc import Cli, in_process


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text("task: spiral\ntrainer: {max_epochs: 3}\n")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(monkeypatch, capsys)


# Each of `dev`'s options from the job-option table, as a user would give it.
DEV_CALLS = [
    ["dev", "-P", "local", "--account", "proj", "--dry-run", "--json"],
    ["dev", "-P", "local", "--config", "run.yaml", "--dry-run", "--json"],
    ["dev", "-P", "local", "--constraint", "fast", "--dry-run", "--json"],
    ["dev", "-P", "local", "--cpus-per-task", "1", "--dry-run", "--json"],
    ["dev", "-P", "local", "--env", "A=1", "--dry-run", "--json"],
    ["dev", "-P", "local", "--global-batch", "64", "--dry-run", "--json"],
    ["dev", "-P", "local", "--gpus", "2", "--dry-run", "--json"],
    ["dev", "-P", "local", "--gpus-per-node", "2", "--dry-run", "--json"],
    ["dev", "-P", "local", "--grace", "30", "--dry-run", "--json"],
    ["dev", "-P", "local", "--ignore-quarantine", "--dry-run", "--json"],
    ["dev", "-P", "local", "--job-name", "try-it", "--dry-run", "--json"],
    ["dev", "-P", "local", "--launcher", "torchrun", "--dry-run", "--json"],
    ["dev", "-P", "local", "--max-device-batch", "16", "--dry-run", "--json"],
    ["dev", "-P", "local", "--max-epochs", "2", "--dry-run", "--json"],
    ["dev", "-P", "local", "--mem", "1G", "--dry-run", "--json"],
    ["dev", "-P", "local", "--monitor", "--dry-run", "--json"],
    ["dev", "-P", "local", "--monitor-interval", "5", "--dry-run", "--json"],
    ["dev", "-P", "local", "--no-monitor", "--dry-run", "--json"],
    ["dev", "-P", "local", "--no-requeue", "--dry-run", "--json"],
    ["dev", "-P", "local", "--nodes", "2", "--dry-run", "--json"],
    ["dev", "-P", "local", "--on-stall", "report", "--dry-run", "--json"],
    ["dev", "-P", "local", "--partition", "nope", "--dry-run", "--json"],
    ["dev", "-P", "local", "--python-env", "/nonexistent/env", "--dry-run", "--json"],
    ["dev", "-P", "local", "--qos", "normal", "--dry-run", "--json"],
    ["dev", "-P", "local", "--requeue", "--dry-run", "--json"],
    ["dev", "-P", "local", "--restarts", "3", "--dry-run", "--json"],
    ["dev", "-P", "local", "--retries", "1", "--dry-run", "--json"],
    ["dev", "-P", "local", "--sbatch-arg=--comment=x", "--dry-run", "--json"],
    ["dev", "-P", "local", "--set", "trainer.max_epochs=4", "--dry-run", "--json"],
    ["dev", "-P", "local", "--stall-window", "60", "--dry-run", "--json"],
    ["dev", "-P", "local", "--task", "spiral", "--dry-run", "--json"],
    ["dev", "-P", "local", "--time", "30", "--dry-run", "--json"],
]
# What a dev job sets apart: it waits for a shell instead of launching, so what only a launched
# command needs is the batch job's (`submit --like-dev`), and a note says so.
DEV_ONLY = {"dev_idle_s", "dev_warn_s", "grace_s", "requeue", "stall_window", "restarts",
            "retries", "notes"}


def _answer(cli: Cli, args: list[str]) -> tuple[int, dict[str, Any]]:
    r = cli(*args)
    data = json.loads(r.out)
    if r.code:
        return r.code, data["error"]
    if args[0] == "dev":
        assert any("--like-dev" in n for n in data["plan"]["notes"]), data["plan"]["notes"]
    return r.code, {k: v for k, v in data["plan"].items() if k not in DEV_ONLY}


@pytest.mark.parametrize("args", DEV_CALLS, ids=lambda a: a[3])
def test_dev_plans_each_option_as_submit_does(cli: Cli, args: list[str]) -> None:
    dev = _answer(cli, args)
    submitted = _answer(cli, ["submit", *args[1:]])
    assert dev == submitted, (dev, submitted)


def test_restarts_reach_the_plan_and_the_script_from_every_command(cli: Cli) -> None:
    rendered = json.loads(cli("render", "--profile", "local", "--restarts", "3",
                              "--json").out)["alternatives"][0]
    assert rendered["plan"]["restarts"] == 3
    assert "python -m hpctrain.supervisor --restarts 3 --" in rendered["script"]
    submitted = json.loads(cli("submit", "--profile", "local", "--restarts", "0", "--dry-run",
                               "--json").out)
    assert submitted["plan"]["restarts"] == 0
    # The supervisor still runs the step: a taken rendezvous port starts it on the next one.
    assert "python -m hpctrain.supervisor --restarts 0 --" in submitted["script_text"]
    swept = cli("sweep", "--profile", "local", "--grid", "trainer.max_epochs=1,2",
                "--restarts", "1", "--dry-run", "--json")
    assert swept.code == 0, swept.err
    assert "python -m hpctrain.supervisor --restarts 1 --" in swept.out
    # A command of one's own restarts only when asked, with a note on resuming.
    own = json.loads(cli("render", "--profile", "local", "--restarts", "1", "--json", "--",
                         "python", "train.py").out)["alternatives"][0]["plan"]
    assert own["restarts"] == 1 and any("from its beginning" in n for n in own["notes"])
    refused = cli("render", "--profile", "local", "--restarts", "21", "--json")
    assert refused.code == 1 and "--restarts 21: give 0 to 20" in refused.err

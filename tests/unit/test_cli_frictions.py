"""A newcomer's frictions (shared/reviews/2026-11-27-newcomer.md, items 13-27): the command
list uncut, help wording, did-you-mean for profiles and fields, completion of what a user
types next, one validation round for a profile, computed fixes shown, one JSON shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from hpctrain.errors import ConfigError, PlanError
from tests.unit.inproc import Cli, in_process

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(monkeypatch, capsys)


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed entry point, as a shell runs it (completion reads its environment)."""
    return subprocess.run([str(REPO / ".venv" / "bin" / "hpctrain"), *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env}, check=False)


# Item 13: the command lists show every command's line whole.


def _command_list(help_text: str) -> list[str]:
    return help_text.split("Commands:\n", 1)[1].splitlines()


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("group", [(), ("profiles",), ("devcluster",), ("data",)])
def test_command_lists_cut_nothing(group: tuple[str, ...], columns: str) -> None:
    r = _run(*group, "--help", COLUMNS=columns)
    assert r.returncode == 0, r.stderr
    lines = _command_list(r.stdout)
    assert lines and not [line for line in lines if "..." in line], r.stdout
    # Each line holds the command and its summary: nothing folded onto a second line.
    assert all(re.match(r"^  \S+ +\S", line) for line in lines if line.strip()), r.stdout


def test_every_command_has_a_summary_that_fits() -> None:
    import typer.main

    from hpctrain.cli import build_app
    from hpctrain.cli.commands import SUMMARY

    def paths(group: object, prefix: str) -> list[str]:
        found = []
        for name, command in getattr(group, "commands", {}).items():
            found.append(prefix + name)
            found += paths(command, f"{prefix}{name} ")
        return found

    every = paths(typer.main.get_command(build_app()), "")
    assert sorted(every) == sorted(SUMMARY)
    # click's list is 78 columns at most: 2 + the longest name (12) + 2 + the summary.
    assert max(len(s) for s in SUMMARY.values()) <= 60


# Item 15: help that says each thing once.


def test_requeue_and_login_help_read_cleanly() -> None:
    r = _run("submit", "--help", COLUMNS="200")
    text = " ".join(r.stdout.split())
    requeue = text.split("--requeue / --no-requeue", 1)[1].split("--monitor", 1)[0]
    assert requeue.count("default") == 1 and "[default: requeue]" in requeue, requeue
    login = text.split("--login DEST", 1)[1].split("--", 1)[0]
    assert "login:" not in login and "docs/remote.md" in login, login


# Item 16: profile names get a suggestion, a missing value is named as such.


@pytest.mark.parametrize("typed", ["ravn", "Raven", "RAVEN", "rave"])
def test_a_mistyped_profile_gets_did_you_mean(cli: Cli, typed: str) -> None:
    r = cli("render", "-P", typed)
    assert r.code == 1 and f"unknown profile '{typed}' (did you mean raven?)" in r.err, r.err
    assert "Fix: choose one of: gilbreth, local, marvin, raven" in r.err


def test_an_unlike_profile_name_gets_no_guess(cli: Cli) -> None:
    r = cli("render", "-P", "zzzz")
    assert r.code == 1 and "unknown profile 'zzzz'\n" in r.err and "did you mean" not in r.err


def test_an_option_taken_as_the_profile_is_named(cli: Cli) -> None:
    r = cli("render", "-P", "-N", "2")
    assert r.code == 1 and "'-N' looks like an option" in r.err, r.err
    assert "-N.yaml" not in r.err and "right after --profile/-P" in r.err


def test_a_missing_profile_option_lists_the_profiles(cli: Cli) -> None:
    r = cli("render")
    assert r.code == 2 and "Missing option '--profile'" in r.err
    assert "Fix: give --profile NAME" in r.err and "gilbreth, local, marvin, raven" in r.err
    r = cli("render", "--json")
    assert "raven" in json.loads(r.out)["error"]["fix"]


def test_validate_takes_a_profile_name(cli: Cli) -> None:
    r = cli("profiles", "validate", "raven", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"valid": True, "name": "raven",
                                 "path": str(REPO / "cluster_profiles" / "raven.yaml")}
    r = cli("profiles", "validate", "ravn")
    assert r.code == 1 and "did you mean raven?" in r.err and "does not exist" not in r.err
    r = cli("profiles", "validate", "nowhere.yaml")
    assert r.code == 1 and "profile file nowhere.yaml not found" in r.err


# Item 17: -G is sbatch's total GPUs, never GPUs per node.


def test_rerun_has_no_dash_g(cli: Cli) -> None:
    r = cli("rerun", "1", "-G", "1")
    assert r.code == 2 and "No such option '-G'" in r.err, r.err


# Item 18: completion of what comes next.


def _complete(line: str) -> list[str]:
    words = line.split(" ")
    r = _run(_HPCTRAIN_COMPLETE="complete_bash", COMP_WORDS=line,
             COMP_CWORD=str(len(words) - 1))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize(("line", "expected"), [
    ("hpctrain profiles show ", ["gilbreth", "local", "marvin", "raven"]),
    ("hpctrain profiles check r", ["raven"]),
    ("hpctrain profiles validate ma", ["marvin"]),
    ("hpctrain profiles probe g", ["gilbreth"]),
    ("hpctrain render --launcher ", ["srun", "torchrun", "per-node"]),
    ("hpctrain submit -P raven --launcher t", ["torchrun"]),
    ("hpctrain train --task ", ["custom", "fashionmnist", "mnist", "spiral", "synthcifar"]),
    ("hpctrain train --task sp", ["spiral"]),
    ("hpctrain train --scale-lr ", ["none", "linear"]),
    # The job commands take the trainer's --task from its table, completion included.
    ("hpctrain submit -P local --task sp", ["spiral"]),
    ("hpctrain scale -P local --task m", ["mnist"]),
    ("hpctrain scale --profile gil", ["gilbreth"]),
])
def test_bash_completes_values(line: str, expected: list[str]) -> None:
    assert _complete(line) == expected


# Item 19 and 27: a profile written from scratch, refused once for everything.


FROM_SCRATCH = """\
partitions:
  - name: gpu
    max_time: "1:00:00"
    gpus_per_node: 4
    cpus_per_node: 32
    mem_per_node_mb: 100000
    max_node: 3
  - name: cpu
    gpus_per_node: 0
    cpus_per_node: 32
    mem_per_node_mb: 100000
    max_nodes: 3
gpu_requets: gres
"""


def test_a_new_profile_hears_every_problem_at_once(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(FROM_SCRATCH)
    r = cli("profiles", "validate", str(f))
    assert r.code == 1
    what, _, fix = r.err.partition("  Fix: ")
    assert what.splitlines() == [
        f"Error: {f}:1: cluster: Field required",
        f"{f}:7: partitions[name=gpu].max_node: unknown field (did you mean max_nodes?)",
        f"{f}:8: partitions[name=cpu].max_time: Field required",
        f"{f}:13: gpu_requets: unknown field (did you mean gpu_request?)",
        f"{f}:2: partitions[name=gpu].max_nodes: required field missing",
    ]
    # What each missing field holds, in the one Fix.
    for words in ("cluster: the cluster's name", "max_time: the partition's wall-time limit",
                  "max_nodes: the most nodes one job may use", "`hpctrain profiles show raven`"):
        assert words in fix, fix


def test_an_unlike_profile_field_keeps_typo(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("extends: raven\nzzzzzz: 1\n")
    r = cli("profiles", "validate", str(f))
    assert r.code == 1 and f"{f}:2: zzzzzz: unknown field (typo?)" in r.err, r.err


def test_a_mistyped_trainer_field_gets_did_you_mean(tmp_path: Path) -> None:
    from hpctrain.trainconfig.load import load_config

    f = tmp_path / "c.yaml"
    f.write_text("trainer: {batchsize: 4}\ntrainr: {}\noptim: {LR: 0.1, qqqq: 1}\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    lines = [line.strip() for line in e.value.what.splitlines()]
    assert f"{f}: trainer.batchsize: unknown field (did you mean batch_size?)" in lines
    assert f"{f}: trainr: unknown field (did you mean trainer?)" in lines
    assert f"{f}: optim.LR: unknown field (did you mean lr?)" in lines
    assert f"{f}: optim.qqqq: unknown field" in lines
    with pytest.raises(ConfigError, match=r"--set: trainer\.max_epoch: unknown field \(did you "
                                          r"mean max_epochs\?\)"):
        load_config(None, "spiral", ["trainer.max_epoch=3"])


# Item 21: a plan's computed fixes reach the Fix: line and the JSON; no-slurm.conf is short.


def test_plan_error_fixes_are_its_fix() -> None:
    e = PlanError(["8 GPUs on one node is impossible"], fixes=["--nodes 2", "--gpus 8"])
    assert (e.fix, e.fixes, e.problems) == ("--nodes 2; --gpus 8", ["--nodes 2", "--gpus 8"],
                                            ["8 GPUs on one node is impossible"])
    assert PlanError(["x"]).fix is None and PlanError(["x"]).fixes == []
    # A fix set afterwards (or handed on by a re-raiser) is the one fix.
    e.fix = "--nodes 4"
    assert e.fixes == ["--nodes 4"] and str(e) == "8 GPUs on one node is impossible - --nodes 4"


def test_plan_error_fixes_are_shown(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PlanError(["raven: 8 GPUs on one node is impossible (4 per node)"],
                        fixes=["--nodes 2 --gpus-per-node 4"])

    monkeypatch.setattr("hpctrain.render.script.plan_script", refuse)
    r = cli("render", "-P", "raven", "--gpus-per-node", "8", "--json")
    assert r.code == 1
    assert json.loads(r.out) == {"error": {
        "what": "raven: 8 GPUs on one node is impossible (4 per node)",
        "fix": "--nodes 2 --gpus-per-node 4"}}
    assert "  Fix: --nodes 2 --gpus-per-node 4" in r.err


def test_no_slurm_conf_is_short_and_names_every_route() -> None:
    from hpctrain.slurm.transport import no_conf_error

    for e in (no_conf_error(), no_conf_error("/nowhere/slurm.conf")):
        assert "no slurm.conf is readable here" in e.what and len(e.what) < 120, e.what
        assert e.fix is not None
        for route in ("`login:`", "--login DEST", "hpctrain login", "export SLURM_CONF",
                      "hpctrain devcluster up"):
            assert route in e.fix, route


# Item 23: a rendered script has one JSON shape.


def test_sweep_dry_run_names_the_script_as_render_does(cli: Cli) -> None:
    r = cli("render", "-P", "local", "--json")
    assert r.code == 0, r.err
    rendered = json.loads(r.out)["alternatives"][0]
    r = cli("sweep", "-P", "local", "--grid", "optim.lr=0.1,0.2", "--dry-run", "--json")
    assert r.code == 0, r.err
    swept = json.loads(r.out)
    for key in ("plan", "script", "check"):
        assert type(swept[key]) is type(rendered[key]), key
    assert set(swept["plan"]) == set(rendered["plan"])
    assert swept["script"].startswith("#!/bin/bash") and swept["check"] is None

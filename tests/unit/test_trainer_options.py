"""The trainer's option table (trainconfig/options.py): both entry points, and the job side.

One declaration makes `python -m hpctrain.trainer` and `hpctrain train`; a setting made in a
config file, by `--set`, by the trainer's flag or by submit's flag gives the same resolved
settings and the same rendered job, and the job's command rebuilds those settings exactly.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
import yaml

from hpctrain.cli import app
from hpctrain.errors import ConfigError
from hpctrain.files import yamlread
from hpctrain.trainconfig.load import load_config, parse_override
from hpctrain.trainconfig.options import OPTIONS, config_args, flow_value, parse_call
from hpctrain.trainer import entry
from tests.unit.inproc import Cli, Ran, in_process


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`hpctrain ARGS` in this process, through the entry point and its error boundary."""
    return in_process(monkeypatch, capsys)


@pytest.fixture
def trainer(capsys: pytest.CaptureFixture[str]) -> Cli:
    """`python -m hpctrain.trainer ARGS` in this process (its main, as __main__ calls it)."""

    def run(*args: str) -> Ran:
        code = entry.main(list(args))
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


# One declaration, both entry points


def _argparse_options() -> list[tuple[tuple[str, ...], str | None, str | None]]:
    return [(tuple(a.option_strings), a.help, a.metavar)
            for a in entry.build_parser()._actions if "--help" not in a.option_strings]


def _typer_options() -> list[tuple[tuple[str, ...], str | None, str | None]]:
    train = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    return [(tuple(p.opts), p.help, p.metavar) for p in train.params
            if isinstance(p, click.Option) and "--help" not in p.opts]


def test_both_entry_points_list_the_same_options_in_the_same_order() -> None:
    table = [((o.flag,), o.help, o.metavar) for o in OPTIONS]
    assert _argparse_options() == table
    assert _typer_options() == table
    assert {o.flag for o in OPTIONS} >= {"--global-batch", "--max-device-batch", "--scale-lr"}


def test_both_helps_show_every_option(cli: Cli) -> None:
    module = subprocess.run([sys.executable, "-m", "hpctrain.trainer", "--help"],
                            capture_output=True, text=True, timeout=120, check=True).stdout
    typed = cli("train", "--help")
    assert typed.code == 0
    for o in OPTIONS:
        shown = f"{o.flag} {o.metavar}" if o.metavar else o.flag
        assert shown in module and shown in typed.out, shown
    # The choices come from the config model's Literal, not a copy.
    assert "--scale-lr none|linear" in module


# Values as flow YAML: one line that --set reads back as the same value

TRICKY: list[Any] = [
    "1e-05", "1.0", "0x10", "010", "yes", "no", "on", "null", "~", "", " x ", "a\nb", "\t",
    "'; $(touch x) y", "#c", "- a", "a: b", "[x]", "{y}", "é", "\u2028", "*alias", "!tag",
    0, -1, 10**30, 1e-05, 0.1, 1e300, -0.0, math.inf, None, True, False, [], {},
    [1, "2", None, [3.5]], {"a b": [1, {"c": None}], "1": "x", "yes": "no"},
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_flow_values_load_back_to_the_same_value(value: Any) -> None:
    text = flow_value(value)
    assert "\n" not in text
    for loaded in (yamlread.load(text), parse_override(f"k={text}")[1]):
        assert loaded == value and type(loaded) is type(value), (text, loaded)


def _settings(*sets: str, task: str | None = None) -> Any:
    return load_config(task=task, overrides=list(sets))


def test_the_command_rebuilds_the_settings_exactly() -> None:
    hostile = "'; $(touch x) and \"spaces\"\n"
    config = _settings(
        "custom.module=pkg.mod:Model", f"custom.module_kwargs={flow_value({'s': hostile})}",
        "custom.datamodule_kwargs={root: /d, n: '12', x: 1e-05}", "optim.lr=1e-05",
        "data.dir=null", "logging.comet_project='007'", "trainer.devices=1",
        "trainer.cuda_graphs=false", task="custom")
    args = config_args(config)
    assert args[:2] == ("--task", "custom")
    assert parse_call(args).load() == config
    # Only what differs from the task's defaults is written, in field order.
    keys = [a.split("=", 1)[0] for a in args[3::2]]
    assert keys == ["optim.lr", "trainer.devices", "trainer.cuda_graphs",
                    "logging.comet_project", "custom.module", "custom.module_kwargs",
                    "custom.datamodule_kwargs"]


@pytest.mark.parametrize("task", ["spiral", "mnist", "fashionmnist"])
def test_a_task_default_is_just_its_task(task: str) -> None:
    assert config_args(_settings(task=task)) == ("--task", task)


# A setting made anywhere gives the same settings and the same job

SETTINGS = {
    "cuda_graphs": ("trainer:\n  cuda_graphs: true\n", ["--set", "trainer.cuda_graphs=true"],
                    None, None),
    "global_batch": ("trainer:\n  global_batch: 64\n", ["--set", "trainer.global_batch=64"],
                     ["--global-batch", "64"], ["--global-batch", "64"]),
    "max_device_batch": ("trainer: {global_batch: 64, max_device_batch: 8}\n",
                         ["--set", "trainer.global_batch=64", "--set",
                          "trainer.max_device_batch=8"],
                         ["--global-batch", "64", "--max-device-batch", "8"],
                         ["--global-batch", "64", "--max-device-batch", "8"]),
}


def _ways(name: str) -> list[tuple[list[str], list[str]]]:
    """(submit's options, the trainer's arguments) for each way of making the setting."""
    text, sets, trainer_flags, submit_flags = SETTINGS[name]
    Path("c.yaml").write_text(text)
    ways = [(["--config", "c.yaml"], []), ([], ["--config", "c.yaml"]), ([], sets)]
    if trainer_flags:
        ways.append(([], trainer_flags))
    if submit_flags:
        ways.append((submit_flags, []))
    return ways


def _job(cli: Cli, shape: list[str], submit: list[str], args: list[str]) -> Ran:
    command = ["--", "python", "-m", "hpctrain.trainer", *args] if args else []
    return cli("render", "-P", "local", *shape, *submit, "--json", *command)


def _rendered(cli: Cli, shape: list[str], submit: list[str], args: list[str]) -> Any:
    r = _job(cli, shape, submit, args)
    assert r.code == 0, r.err
    (data,) = json.loads(r.out)["alternatives"]
    # The header names the command line that made the script; everything else must agree.
    data["script"] = [ln for ln in data["script"].splitlines() if not ln.startswith("# Made by")]
    return data


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_file_and_the_same_flag_give_identical_jobs(cli: Cli, name: str) -> None:
    one_gpu = ["--nodes", "1", "--gpus-per-node", "1"]
    jobs = [_rendered(cli, one_gpu, submit, args) for submit, args in _ways(name)]
    assert all(job == jobs[0] for job in jobs[1:])
    assert "--config" not in jobs[0]["plan"]["command"]


def test_the_plan_rules_hold_wherever_the_setting_was_made(cli: Cli) -> None:
    for submit, args in _ways("cuda_graphs"):
        r = _job(cli, ["--nodes", "2"], submit, args)
        assert r.code == 1 and "trainer.cuda_graphs=true needs one training process" in r.err
        r = _job(cli, ["--gpus-per-node", "0"], submit, args)
        assert r.code == 1 and "needs a GPU; this job has none" in r.err
    for submit, args in _ways("global_batch"):
        r = _job(cli, ["--nodes", "2"], submit, args)
        assert r.code == 0, r.err
        assert json.loads(r.out)["alternatives"][0]["plan"]["notes"] == [
            "global batch 64 = 16 per device x 4 device(s) x 1 accumulated step(s)"]
        r = _job(cli, ["--nodes", "3", "--gpus-per-node", "1"], submit, args)
        assert r.code == 1 and "trainer.global_batch 64: global batch 64 cannot be split" \
            in r.err and "use a global batch of 63 or 66" in r.err
    for submit, args in _ways("max_device_batch"):
        r = _job(cli, ["--nodes", "2"], submit, args)
        note = json.loads(r.out)["alternatives"][0]["plan"]["notes"]
        assert note == ["global batch 64 = 8 per device x 4 device(s) x 2 accumulated step(s)"]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_file_and_the_same_flag_resolve_to_the_same_settings(trainer: Cli, name: str) -> None:
    shown = []
    for submit, args in _ways(name):
        r = trainer(*submit, *args, "--print-config")
        assert r.code == 0, r.err
        shown.append(r.out)
    assert all(s == shown[0] for s in shown[1:])
    assert yaml.safe_load(shown[0])["trainer"][name] == yaml.safe_load(
        Path("c.yaml").read_text())["trainer"][name]


def test_hpctrain_train_takes_global_batch_and_max_device_batch(cli: Cli, trainer: Cli) -> None:
    r = cli("train", "--task", "mnist", "--global-batch", "96", "--max-device-batch", "16",
            "--print-config")
    assert r.code == 0, r.err
    shown = yaml.safe_load(r.out)
    assert (shown["trainer"]["global_batch"], shown["trainer"]["max_device_batch"]) == (96, 16)
    same = trainer("--task", "mnist", "--global-batch", "96", "--max-device-batch", "16",
                   "--print-config")
    assert same.out == r.out


def _problem(err: str) -> str:
    """The refusal's line about the field, without the origin that starts it."""
    line = next(ln for ln in err.splitlines() if "trainer.max_epochs" in ln)
    return line.strip().split(": ", 1)[1]


def test_a_bad_value_reads_alike_from_a_flag_and_from_a_file(cli: Cli, trainer: Cli) -> None:
    Path("bad.yaml").write_text("trainer:\n  max_epochs: zero\n")
    by_file = trainer("--config", "bad.yaml")
    refusals = [trainer("--max-epochs", "zero"), trainer("--set", "trainer.max_epochs=zero"),
                cli("train", "--max-epochs", "zero"),
                cli("render", "-P", "local", "--", "python", "-m", "hpctrain.trainer",
                    "--max-epochs", "zero"),
                cli("render", "-P", "local", "--config", "bad.yaml")]
    assert by_file.code == 1 and "bad.yaml: trainer.max_epochs: Input should be a valid " \
        "integer" in by_file.err and "(got 'zero')" in by_file.err
    for r in refusals:
        assert r.code == 1 and r.err.startswith("Error: invalid trainer config"), r.err
        assert _problem(r.err) == _problem(by_file.err)


def test_the_job_side_refuses_a_trainer_command_as_a_config_error(cli: Cli) -> None:
    with pytest.raises(ConfigError, match="unrecognized arguments: --nope"):
        parse_call(["--nope"])
    with pytest.raises(ConfigError, match="argument --max-epochs: expected one argument"):
        parse_call(["--max-epochs"])
    r = cli("render", "-P", "local", "--", "python", "-m", "hpctrain.trainer", "--help")
    assert r.code == 1 and "Error: the packaged trainer's command: unrecognized arguments: " \
        "--help" in r.err and "python -m hpctrain.trainer --help" in r.err
    Path("c.yaml").write_text("seed: 1\n")
    r = cli("render", "-P", "local", "--config", "c.yaml", "--", "python", "-m",
            "hpctrain.trainer", "--config", "c.yaml")
    assert r.code == 1 and "--config is given twice" in r.err
    r = cli("render", "-P", "local", "--global-batch", "8", "--", "python", "train.py")
    assert r.code == 1 and "--global-batch applies to the packaged trainer" in r.err


def test_run_options_follow_the_settings(cli: Cli) -> None:
    r = cli("render", "-P", "local", "--json", "--", "python", "-m", "hpctrain.trainer",
            "--resume", "never", "--seed", "7", "--run-dir", "/scratch/r")
    assert r.code == 0, r.err
    assert json.loads(r.out)["alternatives"][0]["plan"]["command"] == [
        "python", "-m", "hpctrain.trainer", "--task", "spiral", "--set", "seed=7",
        "--run-dir", "/scratch/r", "--resume", "never"]


def test_hostile_values_reach_the_job_as_one_argument_each(cli: Cli, tmp_path: Path) -> None:
    hostile = {"s": "'; $(touch x) `touch y` \"q\" and spaces", "n": "12"}
    r = cli("render", "-P", "local", "--json", "--", "python", "-m", "hpctrain.trainer",
            "--task", "custom", "--set", "custom.module=pkg.mod:Model",
            "--set", f"custom.module_kwargs={flow_value(hostile)}")
    assert r.code == 0, r.err
    (data,) = json.loads(r.out)["alternatives"]
    lines = data["script"].splitlines()
    launch = next(ln for ln in lines if ln.startswith("  hpctrain-srun python"))
    # The script's own words for the step, with the step replaced by printing its arguments.
    words = launch.removeprefix("  hpctrain-srun ").removesuffix(" &")
    shown = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    assert shown.split("\0")[:-1] == data["plan"]["command"]
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    args = data["plan"]["command"][3:]
    assert parse_call(args).load().custom.module_kwargs == hostile


def test_a_study_writes_each_run_s_batch_into_its_settings() -> None:
    from hpctrain.plan import JobRequest, build_plan
    from hpctrain.profiles import load_profile
    from hpctrain.submission.scaling_study import StudyPlan, plan_runs
    from hpctrain.trainconfig.options import TrainerCall

    runs = plan_runs("1x1,1x2", strong=True, batch_size=64, trainer=TrainerCall(task="spiral"))
    call = TrainerCall(task="spiral", sets=("seed=5",), shortcuts=(("trainer.max_epochs", "3"),))
    study = StudyPlan(JobRequest(profile=load_profile("local")), runs, True, call.load())
    commands = [build_plan(study.request(t, b)).command for t, b in runs]
    assert [c[3:] for c in commands] == [
        ("--task", "spiral", "--set", "seed=5", "--set", "trainer.max_epochs=3", "--set",
         f"trainer.batch_size={b}") for b in (64, 32)]
    assert study.as_dict()["trainer_args"] == [
        "--task", "spiral", "--set", "seed=5", "--set", "trainer.max_epochs=3"]


def test_a_secret_in_the_settings_is_refused_before_it_reaches_the_script(
        cli: Cli, tmp_path: Path) -> None:
    # Every setting is written into the job's command (the script, the history): a key that
    # names a secret is refused as --env refuses one, wherever the setting was made.
    (tmp_path / "my.yaml").write_text(
        "task: custom\ncustom:\n  module: pkg.mod:Model\n"
        "  module_kwargs: {width: 8, hub: {api_token: s3cr3t}}\n")
    r = cli("render", "-P", "local", "--config", "my.yaml")
    assert r.code == 1 and "s3cr3t" not in r.out + r.err
    assert "custom.module_kwargs.hub.api_token: looks like a secret" in r.err, r.err
    r = cli("render", "-P", "local", "--", "python", "-m", "hpctrain.trainer", "--task",
            "custom", "--set", "custom.module=pkg.mod:Model",
            "--set", "custom.datamodule_kwargs={password: x}")
    assert r.code == 1 and "custom.datamodule_kwargs.password: looks like a secret" in r.err


def test_a_value_that_is_not_utf8_is_refused_in_one_line(trainer: Cli) -> None:
    # Bytes that are not UTF-8 in argv reach Python as lone surrogates (os.fsdecode).
    r = trainer("--set", "logging.comet_project=a\udcff", "--print-config")
    assert r.code == 1
    assert "Error: override logging.comet_project: the value contains bytes that are not " \
           "UTF-8 text" in r.err and "Traceback" not in r.err

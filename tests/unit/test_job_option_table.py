"""The job-option table (cli/options.py) and the trainer's (trainconfig/options.py): every
command that takes a job or trainer option shows it as the table declares it; one batch-split
rule; one default task."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import typer
import typer.main

from hpctrain.cli import build_app
from hpctrain.cli.flags import JSON
from hpctrain.cli.options import (
    TRAINER_FLAGS,
    TRAINER_HELP,
    JobOptions,
    job_table,
    trainer_option,
    with_job_options,
)
from hpctrain.errors import ConfigError
from hpctrain.studies import scaling_table
from hpctrain.tasks import registry
from hpctrain.trainconfig.options import OPTIONS
from hpctrain.values import batching
from tests.unit.inproc import Cli, in_process

REPO = Path(__file__).resolve().parents[2]
# Options that share a job option's flags and mean something else: the cluster devcluster
# emulates.
OTHER_MEANING = {("devcluster", "up"): {"profile", "nodes"},
                 ("free",): {"profiles"}}  # several profiles: a view of each
# The table's rows in a command's own words: a rerun's changes to the recorded job (default:
# the job's own value); all but the help and the default as the table declares them.
OWN_WORDS = {("rerun",): {"nodes", "gpus_per_node", "time"}}


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(monkeypatch, capsys)


def _shown(p: click.Parameter) -> tuple[object, ...]:
    """What a user sees of an option: flags, help, value name, default, type, repeatable."""
    return (tuple(p.opts), tuple(p.secondary_opts), getattr(p, "help", None), p.metavar,
            p.default, p.required, p.type.name, p.multiple,
            p._custom_shell_complete is not None)


def _reference() -> dict[str, tuple[object, ...]]:
    """Every table entry as a command made only of it shows it."""

    @with_job_options()
    def every(job: JobOptions) -> None:
        pass

    app = typer.Typer(add_completion=False)
    app.command()(every)
    cmd = typer.main.get_command(app)
    return {p.name: _shown(p) for p in cmd.params if p.name}


def _commands(cmd: click.Command, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


def test_every_command_shows_a_job_option_as_the_table_declares_it() -> None:
    reference = _reference()
    flags = {f for name, shown in reference.items() for f in shown[0]}  # type: ignore[attr-defined]
    seen: dict[str, set[tuple[str, ...]]] = {}
    for path, cmd in _commands(typer.main.get_command(build_app())):
        if path == ("train",):  # the trainer's own command: its table without the prefix
            continue
        for p in cmd.params:
            if not isinstance(p, click.Option) or not set(p.opts) & flags:
                continue
            if p.name in OTHER_MEANING.get(path, ()):
                continue
            assert p.name in reference, f"{' '.join(path)} declares {p.opts} itself"
            if p.name in OWN_WORDS.get(path, ()):
                assert _unworded(_shown(p)) == _unworded(reference[p.name]), p.opts
                continue
            assert _shown(p) == reference[p.name], f"{' '.join(path)} {p.opts}"
            seen.setdefault(p.name, set()).add(path)
    # The commands that take them: every job command takes the profile; the trainer's
    # options reach every command that runs the trainer.
    assert seen["profile"] == {("submit",), ("render",), ("sweep",), ("scale",), ("dev",)}
    assert seen["partition"] >= {("scale",), ("profiles", "probe")}
    assert seen["sets"] == seen["task"] == seen["max_epochs"] == seen["profile"]
    assert seen["global_batch"] == {("submit",), ("render",), ("sweep",), ("dev",)}


def _unworded(shown: tuple[object, ...]) -> tuple[object, ...]:
    """An option as shown, but for its help and default."""
    return shown[:2] + shown[3:4] + shown[5:]


def _options(flag: str) -> Iterator[tuple[tuple[str, ...], click.Option]]:
    for path, cmd in _commands(typer.main.get_command(build_app())):
        for p in cmd.params:
            if isinstance(p, click.Option) and flag in p.opts:
                yield path, p


def test_json_is_declared_once_with_one_help() -> None:
    declared = []
    for path in (REPO / "hpctrain" / "cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(
                    isinstance(c, ast.Constant) and c.value == "--json"
                    for a in node.args for c in ast.walk(a)):
                declared.append(path.relative_to(REPO).as_posix())
    assert declared == ["hpctrain/cli/flags.py"]
    shown = {path: _shown(p) for path, p in _options("--json")}
    assert len(shown) > 20 and {("render",), ("submit",), ("status",)} <= set(shown)
    (one,) = set(shown.values())
    assert one[2] == JSON.help


def test_free_takes_the_login_and_first_of_that_submit_takes() -> None:
    submit = {p.name: _shown(p) for path, p in _options("--login") if path == ("submit",)}
    submit.update({p.name: _shown(p) for path, p in _options("--first-of") if path == ("submit",)})
    free = {p.name: _shown(p) for path, p in [*_options("--login"), *_options("--first-of")]
            if path == ("free",)}
    assert free["login"] == submit["login"]
    # free places the topologies, it races nothing: the same option in its words.
    assert _unworded(free["first_of"]) == _unworded(submit["first_of"])
    assert free["first_of"][2] != submit["first_of"][2]


def test_the_table_is_the_declaration() -> None:
    reference = _reference()
    for row in job_table():
        shown = reference[row.name]
        if not row.flags.argument:  # an argument's help is shown in its own section
            assert row.flags.help == shown[2]
            assert set(shown[0]) | set(shown[1]) == {  # type: ignore[arg-type]
                f for d in row.flags.decls for f in d.split("/")}
    for flag in TRAINER_FLAGS:
        option = trainer_option(flag)
        assert reference[option.dest][:3] == ((flag,), (), TRAINER_HELP + option.help)
    # Scale's --profile had its own help and no completion.
    assert reference["profile"][2] == "Cluster profile name or YAML file."
    assert reference["profile"][-1] is True


def test_global_batch_is_declared_once() -> None:
    declared = []
    for path in (REPO / "hpctrain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(
                    isinstance(a, ast.Constant) and a.value == "--global-batch"
                    for a in node.args):
                declared.append(path.relative_to(REPO).as_posix())
    assert declared == ["hpctrain/trainconfig/options.py"]
    assert [o.flag for o in OPTIONS].count("--global-batch") == 1


def test_a_name_both_tables_and_a_command_use_is_refused() -> None:
    def sweep_like(job: JobOptions, task: str = "") -> None:
        pass

    with pytest.raises(TypeError, match="task"):
        with_job_options()(sweep_like)


def test_strong_scaling_splits_the_global_batch_by_the_batch_rule() -> None:
    topos = scaling_table.parse_topologies("1x1,1x2,2x2,1x3")
    for batch in (12, 24, 1200):
        got = scaling_table.per_device_batches(topos, True, batch)
        assert got == {t: batching.split_batch(batch, t.gpus, accumulation=1).per_device
                       for t in topos}
    # The fix names the nearest global batches every topology takes (once: any common one).
    with pytest.raises(ConfigError, match="GPUs of 1x3, 2x2") as refused:
        scaling_table.per_device_batches(topos, True, 14)
    assert refused.value.fix == "use a global batch of 12 or 24 (--batch-size)"


def test_one_default_task() -> None:
    from hpctrain.plan.inputs import DEFAULT_TRAINER_ARGS
    from hpctrain.trainconfig.load import choose_task
    from hpctrain.trainconfig.model import TrainConfig

    assert registry.DEFAULT_TASK in registry.names()
    assert TrainConfig().task == choose_task({}, None, "x") == registry.DEFAULT_TASK
    assert DEFAULT_TRAINER_ARGS == ("--task", registry.DEFAULT_TASK)
    # Written once, in the registry (and as its own task's name), as code rather than prose.
    written = []
    for path in (REPO / "hpctrain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == registry.DEFAULT_TASK:
                written.append(path.relative_to(REPO).as_posix())
    assert sorted(written) == ["hpctrain/tasks/registry.py", "hpctrain/tasks/spiral.py"]


def _command(out: str) -> list[str]:
    data = json.loads(out)
    # render's shape holds its one alternative; submit --dry-run's is the plan itself.
    plan = data["alternatives"][0]["plan"] if "alternatives" in data else data["plan"]
    return list(plan["command"])


def test_render_and_submit_take_the_trainer_settings(cli: Cli) -> None:
    r = cli("render", "-P", "local", "--task", "mnist", "--set", "seed=3", "--max-epochs", "2",
            "--json")
    assert r.code == 0, r.err
    assert _command(r.out)[3:] == ["--task", "mnist", "--set", "seed=3", "--set",
                                   "trainer.max_epochs=2"]
    r = cli("submit", "-P", "local", "--task", "mnist", "--max-epochs", "4", "--set",
            "optim.lr=0.5", "--dry-run", "--json")
    assert r.code == 0, r.err
    assert _command(r.out)[3:] == ["--task", "mnist", "--set", "optim.lr=0.5", "--set",
                                   "trainer.max_epochs=4"]
    # After the trainer command's own settings, which they override.
    r = cli("render", "-P", "local", "--max-epochs", "5", "--json", "--", "python", "-m",
            "hpctrain.trainer", "--max-epochs", "9", "--set", "seed=1")
    assert _command(r.out)[3:] == ["--task", "spiral", "--set", "seed=1", "--set",
                                   "trainer.max_epochs=5"]


def test_trainer_settings_given_twice_or_to_a_command_are_refused(cli: Cli) -> None:
    r = cli("submit", "-P", "local", "--task", "mnist", "--dry-run", "--", "python", "-m",
            "hpctrain.trainer", "--task", "spiral")
    assert r.code == 1 and "--task is given twice" in r.err, r.err
    r = cli("render", "-P", "local", "--set", "seed=1", "--", "python", "train.py")
    assert r.code == 1 and "--set applies to the packaged trainer" in r.err, r.err
    r = cli("sweep", "-P", "local", "--task", "mnist", "--grid", "k=1,2", "--dry-run", "--",
            "python", "train.py")
    assert r.code == 1 and "--task applies to the packaged trainer" in r.err, r.err


def test_a_sweep_keeps_its_global_batch_beside_its_task(cli: Cli) -> None:
    # The sweep's own --task/--set/--max-epochs once rebuilt the settings without it.
    r = cli("sweep", "-P", "local", "--task", "spiral", "--max-epochs", "1", "--global-batch",
            "64", "--grid", "optim.lr=0.1,0.2", "--dry-run", "--json")
    assert r.code == 0, r.err
    command = _command(r.out)
    assert "trainer.global_batch=64" in command and "trainer.max_epochs=1" in command


def test_scale_help_reads_its_table_options(cli: Cli) -> None:
    r = cli("scale", "--help")
    text = re.sub(r"\s+", " ", r.out)
    assert r.code == 0
    assert "-P, --profile TEXT Cluster profile name or YAML file." in text
    assert "--max-epochs N Packaged trainer: epochs to train" in text
    assert "--global-batch" not in text and "--nodes" not in text

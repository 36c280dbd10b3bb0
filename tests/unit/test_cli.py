"""The CLI as a user meets it: render, profiles, errors, and a light import."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def hpctrain(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point, as a user's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "hpctrain", *args], capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    r = hpctrain("--version")
    assert r.returncode == 0 and r.stdout.startswith("hpctrain ")


def test_help_lists_commands_with_example() -> None:
    r = hpctrain("--help")
    assert r.returncode == 0
    for cmd in ("render", "profiles"):
        assert cmd in r.stdout
    r = hpctrain("render", "--help")
    assert "Example: hpctrain render --profile raven" in r.stdout


def test_render_raven_two_nodes(tmp_path: Path) -> None:
    r = hpctrain("render", "--profile", "raven", "--nodes", "2", "--dry-run")
    assert r.returncode == 0, r.stderr
    for line in ("--nodes=2", "--ntasks-per-node=4", "--gres=gpu:a100:4", "srun "):
        assert line in r.stdout
    script = tmp_path / "s.sh"
    script.write_text(r.stdout)
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert r.stdout.startswith("#!/bin/bash")  # piped: the plain script only


def test_render_too_many_gpus_names_limit() -> None:
    r = hpctrain("render", "--profile", "raven", "--gpus-per-node", "8", "--dry-run")
    assert r.returncode != 0
    assert "Error:" in r.stderr and "(4 per node" in r.stderr and r.stdout == ""
    assert "Traceback" not in r.stderr


def test_gilbreth_account_is_a_note_in_a_render_and_a_refusal_at_submit() -> None:
    """render makes a script to read: the missing account is written into it; submit, which
    would send it, refuses."""
    r = hpctrain("render", "--profile", "gilbreth", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "# Note: gilbreth requires an account and this script names none: add --account" \
        in r.stdout and "#SBATCH --account" not in r.stdout
    s = hpctrain("submit", "--profile", "gilbreth", "--dry-run")
    assert s.returncode != 0 and "an account is required on gilbreth" in s.stderr


def test_render_json_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "job.sh"
    r = runner.invoke(
        app, ["render", "--profile", "local", "--nodes", "2", "-o", str(out), "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["first_of"] is None and data["written_to"] == str(out)
    (job,) = data["alternatives"]
    assert job["plan"]["total_gpus"] == 4 and job["plan"]["nodes"] == 2
    assert out.read_text() == job["script"] and job["check"] is None
    assert out.stat().st_mode & 0o111


def test_render_command_after_dashes() -> None:
    r = hpctrain("render", "--profile", "local", "--", "python", "train.py", "--lr", "0.1")
    assert r.returncode == 0, r.stderr
    assert "\n  hpctrain-srun python train.py --lr 0.1" in r.stdout


def test_render_env_and_sbatch_args() -> None:
    r = hpctrain(
        "render", "--profile", "local", "--env", "A=b c", "--sbatch-arg=--mail-type=END"
    )
    assert r.returncode == 0, r.stderr
    assert "export A='b c'" in r.stdout and "#SBATCH --mail-type=END" in r.stdout


def test_bad_env_pair() -> None:
    r = hpctrain("render", "--profile", "local", "--env", "NOEQUALS")
    assert r.returncode == 1 and "KEY=VALUE" in r.stderr


def test_profiles_list_show_validate(tmp_path: Path) -> None:
    r = runner.invoke(app, ["profiles", "list", "--json"])
    assert r.exit_code == 0
    names = {p["name"] for p in json.loads(r.stdout)}
    assert {"raven", "gilbreth", "marvin", "local"} <= names
    r = runner.invoke(app, ["profiles", "show", "raven", "--json"])
    assert json.loads(r.stdout)["partitions"][0]["name"] == "gpu"
    good = tmp_path / "mine.yaml"
    good.write_text("extends: raven\nnccl: {socket_ifname: ib0}\n")
    assert hpctrain("profiles", "validate", str(good)).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: raven\nnccl: {socket_ifnam: ib0}\n")
    r = hpctrain("profiles", "validate", str(bad))
    assert r.returncode == 1 and f"{bad}:2: nccl.socket_ifnam: unknown field" in r.stderr


def test_user_profile_used_by_render(_home: Path) -> None:
    d = _home / "config" / "profiles"
    d.mkdir(parents=True)
    (d / "gil.yaml").write_text("extends: gilbreth\ndefault_account: mylab\n")
    r = runner.invoke(app, ["render", "--profile", "gil"])
    assert r.exit_code == 0, r.output
    assert "#SBATCH --account=mylab" in r.stdout


def test_cli_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['hpctrain', 'render', '--profile', 'raven', '--nodes', '2']\n"
        "from hpctrain.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        "heavy = [m for m in ('torch', 'lightning') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "sys.exit(code)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    # The render itself must have succeeded: a command that failed early imports little.
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --nodes=2" in r.stdout


def _params(command: str) -> dict[str, tuple[object, ...]]:
    import typer.main

    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return {p.name: (tuple(p.opts), tuple(p.secondary_opts), p.default, p.required,
                     p.multiple, getattr(p, "help", None)) for p in cmd.params}


def test_render_and_submit_share_every_topology_option() -> None:
    from dataclasses import fields

    from hpctrain.cli.options import JobOptions

    render, submit = _params("render"), _params("submit")
    names = [f.name for f in fields(JobOptions) if f.name != "trainer"]
    assert [n for n in render if n in names] == names == [n for n in submit if n in names]
    assert {n: render[n] for n in names} == {n: submit[n] for n in names}
    assert render["profile"][:4] == (("--profile", "-P"), (), None, True)
    assert render["nodes"][0] == ("--nodes", "-N") and render["nodes"][2] == 1
    assert render["sbatch_arg"][0] == ("--sbatch-arg",) and render["sbatch_arg"][4]


def test_with_job_options_packs_the_options() -> None:
    import typer

    from hpctrain.cli.options import JobOptions, with_job_options
    from hpctrain.trainconfig.options import TrainerCall

    seen: list[tuple[JobOptions, bool]] = []

    @with_job_options()
    def cmd(job: JobOptions, flag: bool = False) -> None:
        seen.append((job, flag))

    mini = typer.Typer()
    mini.command(context_settings={"allow_interspersed_args": False})(cmd)
    r = CliRunner().invoke(mini, ["-P", "raven", "-N", "2", "-e", "A=1", "-e", "B=2", "--flag",
                                  "--set", "seed=1", "--max-epochs", "3", "--task", "mnist",
                                  "--", "python", "-V"])
    assert r.exit_code == 0, r.output
    ((opts, flag),) = seen
    assert flag and opts.profile == "raven" and opts.nodes == 2 and opts.job_name == "hpctrain"
    assert opts.env == ["A=1", "B=2"] and opts.command == ["python", "-V"]
    assert opts.trainer == TrainerCall(task="mnist", sets=("seed=1",),
                                       shortcuts=(("trainer.max_epochs", "3"),))


def test_build_request_passes_every_option_through() -> None:
    from hpctrain.cli.options import JobOptions, build_request
    from hpctrain.trainconfig.options import TrainerCall

    req = build_request(JobOptions(
        profile="raven", partition="gpu", nodes=2, gpus_per_node=4, cpus_per_task=18,
        mem="100G", time="1:00:00", account="acc", qos="q", constraint="gpu", job_name="j",
        launcher="torchrun", env=["A=b=c"], sbatch_arg=["--begin=now"],
        trainer=TrainerCall(config="c.yaml"), python_env="none", command=["python", "t.py"],
    ))
    assert (req.profile.name, req.partition, req.nodes, req.gpus_per_node) == ("raven", "gpu", 2, 4)
    assert (req.cpus_per_task, req.mem, req.time, req.account, req.qos) == (
        18, "100G", "1:00:00", "acc", "q")
    assert (req.constraint, req.job_name, req.launcher, req.config) == (
        "gpu", "j", "torchrun", "c.yaml")
    assert req.env == {"A": "b=c"} and req.sbatch_args == ("--begin=now",)
    assert req.command == ("python", "t.py") and req.python_env is None
    assert req.invocation.startswith("hpctrain")


def test_cli_import_leaves_the_library_unloaded() -> None:
    """`hpctrain --help` stays fast: the CLI modules load the plan, profiles and templates
    only inside commands."""
    heavy = ["hpctrain.plan", "hpctrain.profiles", "hpctrain.render", "hpctrain.submission",
             "hpctrain.tracking", "hpctrain.studies", "jinja2", "pydantic", "yaml"]
    code = f"import sys, hpctrain.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.check_output([sys.executable, "-c", code], text=True, timeout=60)
    assert out.strip() == "[]"


def test_command_table_matches_the_modules() -> None:
    """MODULE_OF names every command, each in the module that registers it."""
    import typer.main

    from hpctrain import cli
    from hpctrain.cli import commands

    whole = typer.main.get_command(cli.build_app())
    assert set(whole.commands) == set(commands.MODULE_OF)  # type: ignore[attr-defined]
    for command, module in commands.MODULE_OF.items():
        alone = typer.main.get_command(cli.build_app([command, "--help"]))
        assert command in alone.commands, f"{command} is not in cli/{module}.py"  # type: ignore[attr-defined]


def test_the_root_help_lists_every_command_without_importing_one() -> None:
    """`hpctrain --help` lists from SUMMARY what the whole app registers, in its order, and a
    mistyped command is still told the close ones, with no command module imported."""
    import typer.main
    from typer.testing import CliRunner

    from hpctrain import cli
    from hpctrain.cli import commands

    whole = typer.main.get_command(cli.build_app())
    assert commands.top_level() == list(whole.commands)  # type: ignore[attr-defined]
    full = CliRunner().invoke(cli.build_app(), ["--help"]).output
    lazy = CliRunner().invoke(cli.build_app(["--help"]), ["--help"]).output
    assert lazy == full and "scale-report  The table and plot" in lazy
    code = ("import sys; sys.argv = ['hpctrain', *sys.argv[1:]]\n"
            "from hpctrain.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('hpctrain.cli.')))")
    for args, shown in ((["--help"], "Commands:"), (["stat"], "Did you mean 'stats', 'status'?")):
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                           timeout=60)
        assert shown in r.stdout + r.stderr
        loaded = r.stdout.strip().splitlines()[-1]
        assert not [m for m in commands.MODULES if f"hpctrain.cli.{m}'" in loaded], loaded


def test_only_the_invoked_command_module_is_imported() -> None:
    code = ("import sys; sys.argv = ['hpctrain', 'status', '--help']\n"
            "from hpctrain.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('hpctrain.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert "hpctrain.cli.jobs" in out
    for other in ("render", "submit", "train", "profiles", "devcluster", "data"):
        assert f"hpctrain.cli.{other}'" not in out


@pytest.mark.parametrize(("args", "unused"), [
    # Plain click help: rich would cost a fifth of the command (issue 43 found scale.py's
    # module-level import of rich.markup on this path).
    (["--help"], ("rich", "torch", "lightning", "jinja2", "pydantic")),
    # Nothing to refresh here; the login's tar upload and logs -f's inotify are not this path.
    (["status"], ("rich", "tarfile", "ctypes", "torch", "jinja2")),
])
def test_the_commands_typed_most_import_only_what_they_use(
        args: list[str], unused: tuple[str, ...], tmp_path: Path) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['hpctrain', *{args!r}]\n"
        "from hpctrain.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        f"found = [m for m in {unused!r} if m in sys.modules]\n"
        "assert not found, found\n"
        "sys.exit(code)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HPCTRAIN_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr


def test_status_of_ended_jobs_asks_and_imports_nothing_of_slurm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs the history knows ended, verdicts made: no SLURM call, and neither the client,
    the places nor the diagnosis imported (issue 43: status at 0.8x torchx --help)."""
    from hpctrain.history import History, StateUpdate
    from tests.jobs.helpers import new_job

    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path))
    history = History()
    rows = [history.add(new_job(str(700 + i))) for i in range(3)]
    history.update([StateUpdate(id=r.id, state="COMPLETED", terminal=True, stale=False,
                                exit_code=0) for r in rows])
    history.set_verdicts([(r.id, "completed") for r in rows])
    unused = ("hpctrain.slurm.client", "hpctrain.places", "hpctrain.diagnosis", "rich")
    code = ("import sys\nsys.argv = ['hpctrain', 'status', '--json']\n"
            "from hpctrain.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            f"print([m for m in {unused!r} if m in sys.modules])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HPCTRAIN_HOME": str(tmp_path), "PATH": ""})
    assert r.returncode == 0, r.stderr
    listing, _, loaded = r.stdout.rpartition("\n[")
    shown = json.loads(listing)
    assert shown["slurm_calls"] == 0 and shown["cluster"] is None
    assert [j["state"] for j in shown["jobs"]] == ["COMPLETED"] * 3
    assert loaded.strip() == "]", loaded

"""One owner per resource (issue 39): nothing that --sbatch-arg, a profile's sbatch_defaults or
the submitting shell's SBATCH_* variables pass may silently replace what hpctrain writes."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import PlanError, ProfileError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.plan.sbatch import hpctrain_spelling
from hpctrain.profiles import load_profile
from hpctrain.profiles.loader import load_profile_file
from hpctrain.render.script import render_script
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.sbatch_options import (
    ASKS_FOR,
    INPUT_VARIABLES,
    input_variables,
    parse_arg,
    sbatch_environment,
)
from hpctrain.slurm.transport import LocalTransport, for_sbatch


def plan(profile: str, **kw: Any) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile(profile), **kw), suggest=False)


def refused(profile: str, **kw: Any) -> list[str]:
    with pytest.raises(PlanError) as e:
        plan(profile, **kw)
    return e.value.problems


def lines(p: JobPlan) -> list[str]:
    return [line for line in render_script(p).splitlines() if line.startswith("#SBATCH")]


# sbatch's spellings, parsed as sbatch reads them


@pytest.mark.parametrize(("arg", "name", "value"), [
    ("--gpus=4", "gpus", "4"), ("--gpus 4", "gpus", "4"), ("-G4", "gpus", "4"),
    ("-G 4", "gpus", "4"), ("-G=4", "gpus", "4"), ("--part=gpu", "partition", "gpu"),
    ("--hold", "hold", None), ("--profle", None, None), ("--mem-per", None, None),
])
def test_an_option_is_parsed_as_sbatch_reads_it(arg: str, name: str | None,
                                                value: str | None) -> None:
    parsed = parse_arg(arg)
    assert (parsed.name, parsed.value) == (name, value)


def test_every_option_hpctrain_writes_has_its_spelling() -> None:
    # The fix table and the table of what each option asks for list the same options.
    assert all(hpctrain_spelling(parse_arg(f"--{name}=4")) for name in ASKS_FOR)
    assert hpctrain_spelling(parse_arg("--mail-type=END")) is None


# --sbatch-arg: refused with hpctrain's option, its value carried over


@pytest.mark.parametrize(("arg", "fix"), [
    ("--gpus=4", "use --gpus 4 (GPUs in all"),
    ("-G 4", "use --gpus 4 (GPUs in all"),
    ("-G4", "use --gpus 4 (GPUs in all"),
    ("--gres=gpu:a100:4", "use --gpus-per-node 4 "),
    ("--gpus-per-node=2", "use --gpus-per-node 2 instead"),
    ("--gpus-per-task=1", "use --gpus-per-node N (one task per GPU"),
    ("--mem-per-gpu=8G", "use --mem MEMORY (per node: 8G for each of its GPUs)"),
    ("--mem-per-cpu=2G", "use --mem MEMORY (per node: 2G for each of its CPUs)"),
    ("--mem=100G", "use --mem 100G instead"),
    ("--cpus-per-gpu=9", "use --cpus-per-task 9 (one task per GPU"),
    ("-c 8", "use --cpus-per-task 8 instead"),
    ("-n 4", "use --gpus 4 (one task per GPU"),
    ("--ntasks=8", "use --gpus 8 (one task per GPU"),
    ("--ntasks-per-node=4", "use --gpus-per-node 4 (one task per GPU"),
    ("-q standby", "use --qos standby instead"),
    ("-t 10", "use --time 10 instead"),
    ("-A lab", "use --account lab instead"),
    ("-N 2", "use --nodes 2 instead"),
    ("-J x", "use --job-name x instead"),
    ("-p gpudev", "use --partition gpudev instead"),
    ("--part=gpudev", "use --partition gpudev instead"),
    ("-o out.txt", "drop it: each run's logs go to its run directory"),
    ("--wait", "use `hpctrain submit`, then `hpctrain logs -f JOB` instead"),
])
def test_sbatch_arg_for_what_hpctrain_writes_names_hpctrain_option(arg: str, fix: str) -> None:
    (problem,) = refused("raven", sbatch_args=[arg])
    assert problem.startswith(f"--sbatch-arg {arg} sets what hpctrain writes itself; ")
    assert fix in problem, problem


def test_one_option_per_sbatch_arg_and_short_ones_written_long() -> None:
    (problem,) = refused("raven", sbatch_args=["-G 4 -c 8"])
    assert "holds several options" in problem
    p = plan("raven", sbatch_args=["-b now", "--mail-type=END", "-H"])
    assert p.extra_sbatch == ("--begin=now", "--mail-type=END", "--hold")
    assert "#SBATCH --begin=now" in lines(p)


def test_other_generic_resources_stand_beside_gpus_per_node_only() -> None:
    p = plan("gilbreth", account="a", sbatch_args=["--gres=nvme:1"])
    assert {"#SBATCH --gpus-per-node=1", "#SBATCH --gres=nvme:1"} <= set(lines(p))
    (problem,) = refused("raven", sbatch_args=["--gres=nvme:1"])
    assert "asks for GPUs with --gres, and a second line replaces it" in problem


# default_qos, and a profile's sbatch_defaults


def _with(profile: str, **changes: Any) -> Any:
    return replace(load_profile(profile), **changes)


def test_default_qos_is_checked_like_qos() -> None:
    standby = _with("gilbreth", default_qos="standby")
    p = build_plan(JobRequest(profile=standby, account="a"), suggest=False)
    assert p.qos == "standby" and p.time == "04:00:00"
    with pytest.raises(PlanError) as e:
        build_plan(JobRequest(profile=standby, account="a", time="10:00:00"), suggest=False)
    assert e.value.problems == [
        "gilbreth: --time 10:00:00 is over the limit of QOS standby (04:00:00)"]
    given = build_plan(JobRequest(profile=standby, account="a", qos="normal",
                                  time="10:00:00"), suggest=False)
    assert [line for line in lines(given) if "--qos" in line] == ["#SBATCH --qos=normal"]
    # A partition's required QOS wins over the profile's default.
    assert build_plan(JobRequest(profile=standby, account="a", partition="training"),
                      suggest=False).qos == "training"


def test_default_qos_must_be_listed() -> None:
    with pytest.raises(ValueError, match="default_qos 'gold' is not in qos"):
        _with("gilbreth", default_qos="gold")


def _user_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    path = tmp_path / "mine.yaml"
    path.write_text("extends: gilbreth\n" + body)
    return path


@pytest.mark.parametrize(("entry", "fix"), [
    ("--qos=standby", "use default_qos: standby"),
    ("-q standby", "use default_qos: standby"),
    ("--account=lab", "use default_account: lab"),
    ("--partition=a30", "give partition a30 `default: true`"),
    ("-t 2:00:00", "give the partitions default_time: 2:00:00"),
    ("--gpus=2", "hpctrain asks for GPUs itself"),
    ("--mem-per-cpu=4G", "memory follows the GPUs' share"),
])
def test_sbatch_defaults_that_hpctrain_writes_are_refused_at_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, fix: str) -> None:
    path = _user_profile(tmp_path, monkeypatch, f"sbatch_defaults: [{entry!r}]\n")
    with pytest.raises(ProfileError) as e:
        load_profile_file(path)
    assert "sbatch_defaults" in e.value.what and fix in e.value.what, e.value.what


def test_default_qos_in_a_profile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _user_profile(tmp_path, monkeypatch,
                         "default_qos: standby\nsbatch_defaults: ['--mail-type=END']\n")
    profile = load_profile_file(path)
    assert profile.default_qos == "standby"
    p = build_plan(JobRequest(profile=profile, account="a"), suggest=False)
    assert "#SBATCH --qos=standby" in lines(p) and "#SBATCH --mail-type=END" in lines(p)


def test_shipped_profiles_set_nothing_hpctrain_writes_through_sbatch_defaults() -> None:
    from hpctrain.profiles.fieldtypes import sbatch_default_problem

    for name in ("gilbreth", "local", "marvin", "raven"):
        assert not [a for a in load_profile(name).sbatch_defaults if sbatch_default_problem(a)]


def test_a_profile_built_in_code_is_checked_by_the_plan_too() -> None:
    profile = _with("raven", sbatch_defaults=["--qos=x"])
    (problem,) = refused_with(profile)
    assert problem == ("raven: sbatch_defaults --qos=x sets what hpctrain writes into every "
                       "script; use default_qos: x")


def refused_with(profile: Any, **kw: Any) -> list[str]:
    with pytest.raises(PlanError) as e:
        build_plan(JobRequest(profile=profile, **kw), suggest=False)
    return e.value.problems


# The submitting shell's SBATCH_* variables


def test_shell_time_and_name_left_out_where_the_options_are_given() -> None:
    p = plan("local", time="10", job_name="mine",
             shell={"SBATCH_TIMELIMIT": "2", "SBATCH_JOB_NAME": "stale"})
    assert p.time == "00:10:00" and p.job_name == "mine"
    assert {"SBATCH_TIMELIMIT=2 left out: the job has --time 10",
            "SBATCH_JOB_NAME=stale left out: the job has --job-name mine"} <= set(p.notes)
    assert "#SBATCH --time=00:10:00" in lines(p) and "#SBATCH --job-name=mine" in lines(p)


def test_shell_time_qos_and_account_are_defaults_checked_like_the_options() -> None:
    p = plan("gilbreth", shell={"SBATCH_ACCOUNT": "lab", "SBATCH_QOS": "standby",
                                "SBATCH_TIMELIMIT": "3:00:00"})
    assert (p.account, p.qos, p.time) == ("lab", "standby", "03:00:00")
    assert "--account lab from SBATCH_ACCOUNT in your shell" in p.notes
    over = refused("gilbreth", shell={"SBATCH_ACCOUNT": "lab", "SBATCH_QOS": "standby",
                                      "SBATCH_TIMELIMIT": "10:00:00"})
    assert over == ["gilbreth: SBATCH_TIMELIMIT (your shell) 10:00:00 is over the limit of "
                    "QOS standby (04:00:00)"]
    gold = refused("gilbreth", account="a", shell={"SBATCH_QOS": "gold"})
    assert gold[0].startswith("gilbreth: unknown QOS 'gold' (from SBATCH_QOS (your shell))")
    never = _with("local", account="never")
    assert "take no account (SBATCH_ACCOUNT (your shell) lab); unset SBATCH_ACCOUNT" in \
        refused_with(never, shell={"SBATCH_ACCOUNT": "lab"})[0]


def test_required_account_sees_the_shell() -> None:
    assert "an account is required" in refused("gilbreth")[0]
    assert plan("gilbreth", shell={"SBATCH_ACCOUNT": "lab"}).account == "lab"
    assert plan("gilbreth", account="own", shell={"SBATCH_ACCOUNT": "lab"}).account == "own"


@pytest.mark.parametrize(("shell", "fix"), [
    ({"SBATCH_GPUS": "4"}, "unset SBATCH_GPUS; hpctrain's spelling: --gpus 4"),
    ({"SBATCH_GRES": "gpu:2"}, "hpctrain's spelling: --gpus-per-node 2"),
    ({"SBATCH_MEM_PER_CPU": "2G"}, "hpctrain's spelling: --mem MEMORY"),
    ({"SBATCH_CPUS_PER_GPU": "4"}, "hpctrain's spelling: --cpus-per-task 4"),
    ({"SBATCH_OUTPUT": "x.out"}, "unset SBATCH_OUTPUT; hpctrain's spelling: nothing: each"),
    ({"SBATCH_SIGNAL": "USR1@60"}, "hpctrain sets it for the packaged trainer (--grace"),
    ({"SLURM_CLUSTERS": "other"}, "a profile is one cluster"),
    ({"SBATCH_PARTITION": "gpudev"}, "use --partition gpudev to mean it, or unset"),
    ({"SBATCH_JOB_NAME": "stale"}, "use --job-name stale to mean it, or unset"),
    ({"SBATCH_WAIT4SWITCH": "1:00"}, "cannot write into the script: unset it"),
    ({"SBATCH_SOMETHING_NEW": "1"}, "cannot write into the script: unset it"),
])
def test_shell_variables_for_what_hpctrain_writes_are_refused(
        shell: dict[str, str], fix: str) -> None:
    (problem,) = refused("raven", shell=shell)
    (var, value), = shell.items()
    assert problem.startswith(f"{var}={value} is set in your shell") and fix in problem, problem


def test_other_shell_variables_are_written_into_the_script() -> None:
    p = plan("raven", command=("true",), shell={
        "SBATCH_EXCLUSIVE": "", "SBATCH_RESERVATION": "r1", "SBATCH_NO_KILL": "0",
        "SBATCH_SIGNAL": "USR1@60", "SBATCH_PARTITION": "gpu"})
    assert p.extra_sbatch == ("--exclusive", "--reservation=r1", "--signal=USR1@60")
    assert "--reservation=r1 from SBATCH_RESERVATION in your shell" in p.notes
    given = plan("raven", sbatch_args=["--reservation=mine"],
                 shell={"SBATCH_RESERVATION": "r1"})
    assert given.extra_sbatch == ("--reservation=mine",)
    assert "SBATCH_RESERVATION left out: the profile or --sbatch-arg sets --reservation" \
        in given.notes
    # Marvin's --threads-per-core=1 makes SLURM ignore a --hint, from wherever it comes.
    assert "--hint with --threads-per-core" in refused(
        "marvin", account="a", shell={"SLURM_HINT": "nomultithread"})[0]


def test_the_cli_hands_over_only_what_sbatch_reads() -> None:
    env = {"SBATCH_QOS": "x", "SLURM_HINT": "y", "SLURM_JOB_ID": "5", "PATH": "/bin"}
    assert input_variables(env) == {"SBATCH_QOS": "x", "SLURM_HINT": "y"}


# sbatch runs without them


def test_sbatch_environment_drops_options_and_an_enclosing_job() -> None:
    mine = {"PATH": "/bin", "SBATCH_TIMELIMIT": "2", "SBATCH_NEWER_OPTION": "1",
            "SLURM_HINT": "x", "SLURM_CONF": "/c", "SLURM_TIME_FORMAT": "relative"}
    assert sbatch_environment(mine) == {"PATH": "/bin", "SLURM_CONF": "/c",
                                        "SLURM_TIME_FORMAT": "relative"}
    in_job = {**mine, "SLURM_JOB_ID": "7", "SLURM_MEM_PER_CPU": "100", "SLURM_JWT": "t"}
    assert sbatch_environment(in_job) == {"PATH": "/bin", "SLURM_CONF": "/c",
                                          "SLURM_TIME_FORMAT": "relative", "SLURM_JWT": "t"}


def test_sbatch_runs_without_the_shell_variables(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\nenv\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "squeue").write_bytes(fake.read_bytes())
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SBATCH_TIMELIMIT", "2")
    monkeypatch.setenv("SBATCH_JOB_NAME", "stale")
    client = SlurmClient(LocalTransport(None), timeout_s=10)
    ran = client.run(["sbatch", "--parsable", "job.sbatch"])
    assert "SBATCH_" not in ran.stdout and "PATH=" in ran.stdout
    assert ran.argv == ("sbatch", "--parsable", "job.sbatch")
    # Only sbatch reads them as options: other commands keep the environment.
    assert "SBATCH_TIMELIMIT=2" in client.run(["squeue"]).stdout


def test_through_a_login_sbatch_runs_under_env_unset() -> None:
    asked: list[tuple[str, ...]] = []

    class Remote:
        batches = True

        def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                    cwd: Any) -> tuple[str, str, int]:
            asked.append(argv)
            return "42\n", "", 0

        def execute_many(self, argvs: Any, limit: float) -> list[tuple[str, str, int]]:
            return [self.execute(a, None, limit, None) for a in argvs]

        def conf_path(self) -> None:
            return None

        def controller_down(self, command: str) -> None:
            return None

        def cluster_name(self) -> str:
            return "c"

        def slurm_version_text(self) -> str:
            return "slurm 24.11.1"

    assert SlurmClient(Remote(), timeout_s=5).submit("job.sbatch") == "42"
    (argv,) = asked
    cut = argv.index("sbatch")
    assert argv[0] == "env" and argv[cut:] == ("sbatch", "--parsable", "job.sbatch")
    unset = set(argv[2:cut:2])
    assert set(argv[1:cut:2]) == {"-u"} and unset == set(INPUT_VARIABLES)
    assert for_sbatch(Remote()).cluster_name() == "c"


# Unknown options on hpctrain's command line: hpctrain's spelling, with the value given


def _hpctrain(*argv: str, home: Path) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "hpctrain", *argv], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "HPCTRAIN_HOME": str(home)}, cwd=home.parent)


@pytest.mark.parametrize(("argv", "fix"), [
    (("--gres", "gpu:4"), "Fix: hpctrain's spelling: --gpus-per-node 4 (hpctrain writes"),
    (("-n", "4"), "Fix: hpctrain's spelling: --gpus 4 (one task per GPU with --launcher srun)"),
    (("-c", "8"), "Fix: hpctrain's spelling: --cpus-per-task 8\n"),
    (("--ntasks-per-node", "4"), "Fix: hpctrain's spelling: --gpus-per-node 4 (one task per"),
    (("--mem-per-cpu", "4G"), "Fix: hpctrain's spelling: --mem MEMORY (per node: 4G for each"),
    (("-G", "4"), "Fix: hpctrain's spelling: --gpus 4 (GPUs in all, as sbatch's -G)"),
    (("--mail-type", "END"), "an sbatch option reaches sbatch as --sbatch-arg=--mail-type=END"),
])
def test_render_names_hpctrain_option_for_sbatch_ones(tmp_path: Path, argv: tuple[str, ...],
                                                      fix: str) -> None:
    r = _hpctrain("render", "-P", "raven", *argv, home=tmp_path / "home")
    assert r.returncode == 2 and "No such option" in r.stderr
    assert fix in r.stderr, r.stderr
    if "hpctrain's spelling" in fix:
        # --sbatch-arg would refuse what hpctrain writes itself: it is not offered.
        assert "--sbatch-arg" not in r.stderr, r.stderr


def test_a_typo_of_an_hpctrain_option_is_not_sent_to_sbatch(tmp_path: Path) -> None:
    r = _hpctrain("render", "--profle", "raven", home=tmp_path / "home")
    assert r.returncode == 2 and "Did you mean '--profile'?" in r.stderr
    assert "--sbatch-arg" not in r.stderr and "Fix: see `hpctrain render --help`" in r.stderr


@pytest.mark.parametrize(("option", "argv", "fix"), [
    ("--gres", ["-P", "raven", "--gres=gpu:a100:2"], "hpctrain's spelling: --gpus-per-node 2"),
    ("-c", ["-P", "raven", "-c16"], "hpctrain's spelling: --cpus-per-task 16"),
    ("-G", ["-G", "4", "-P", "raven"], "hpctrain's spelling: --gpus 4 (GPUs in all"),
    ("-q", ["-q", "standby"], "hpctrain's spelling: --qos standby"),
    ("--exclusive", ["--exclusive", "-P", "raven"], "reaches sbatch as --sbatch-arg=--exclusive"),
    ("-b", ["-b", "now"], "reaches sbatch as --sbatch-arg='-b now'"),
    ("--export", ["--export=NONE"], "hpctrain's spelling: --env KEY=VALUE (repeatable); or "
     "pass it to sbatch as --sbatch-arg=--export=NONE"),
])
def test_hint_carries_the_value_over(option: str, argv: list[str], fix: str) -> None:
    from hpctrain.cli.habits import hint

    assert fix in hint(option, "render", True, argv)
    assert hint("--profle", "render", True, ["--profle", "raven"]) == \
        "see `hpctrain render --help`"

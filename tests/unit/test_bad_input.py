"""Bad input through the real CLI: an `Error:` line (and a `Fix:`), never a traceback, and
nothing written or lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.inproc import Cli, Ran, in_process
from tests.waits import assert_prompt, timed

BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)
HUGE = "9" * 400
HOSTILE_NAMES = ["it's \"x\".sh", "a; touch PWNED.sh", "$(touch PWNED).sh", "sp ace.sh", "-dash.sh"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `hpctrain ARGS` in this process through the entry point and its error boundary."""
    return in_process(monkeypatch, capsys)


def refused(r: Ran, *words: str, fix: bool = True) -> str:
    """Assert a clean refusal: exit 1, an Error: line, a Fix: line where one exists."""
    assert r.code == 1, (r.code, r.out, r.err)
    assert "Traceback" not in r.err + r.out
    assert r.err.startswith("Error:"), r.err
    assert ("Fix:" in r.err) == fix, r.err
    for w in words:
        assert w in r.err, (w, r.err)
    return r.err


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` but hpctrain's own home (its profile cache)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] != "home"}


# Class 1: files that are not text, not UTF-8, hostile YAML.

BAD_FILES = {
    "binary": b"\x7fELF\x02\x01\x01\x00\x00\x00",
    "latin1": "name: caf\xe9\n".encode("latin-1"),
    "nul": b"task: spiral\x00\n",
    "bomb": BOMB.encode(),
    "deep": b"a: " + b"[" * 200 + b"1" + b"]" * 200 + b"\n",
    "self_alias": b"a: &a [1, *a]\n",
    "huge_int": b"seed: " + b"9" * 5000 + b"\n",
}
WHY = {
    "binary": "binary file", "latin1": "not UTF-8", "nul": "binary file",
    "bomb": "expands to more than", "deep": "nests deeper than", "self_alias": "inside its own",
    "huge_int": "cannot be read",
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_profile_files(cli: Cli, tmp_path: Path, kind: str) -> None:
    f = tmp_path / f"{kind}.yaml"
    f.write_bytes(BAD_FILES[kind])
    refused(cli("render", "--profile", str(f)), str(f), WHY[kind])
    refused(cli("profiles", "validate", str(f)), WHY[kind])


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_trainer_configs(cli: Cli, tmp_path: Path, kind: str) -> None:
    f = tmp_path / f"{kind}.yaml"
    f.write_bytes(BAD_FILES[kind])
    refused(cli("train", "--config", str(f), "--print-config"), WHY[kind])
    before = _files(tmp_path)
    refused(cli("submit", "-P", "local", "--config", f.name, "--dry-run"), WHY[kind])
    refused(cli("submit", "-P", "local", "--config", f.name), WHY[kind])
    assert _files(tmp_path) == before and not (tmp_path / "hpctrain-runs").exists()


def test_directory_empty_and_fifo_profiles(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    refused(cli("render", "-P", "./dir.yaml"), "is a directory")
    refused(cli("train", "--config", "dir.yaml"), "is a directory")
    (tmp_path / "empty.yaml").write_text("")
    refused(cli("render", "-P", "./empty.yaml"), "must be a YAML mapping")
    os.mkfifo(tmp_path / "fifo.yaml")  # nobody writes: reading it must not wait
    refused(cli("render", "-P", "./fifo.yaml"), "not a regular file")
    users = tmp_path / "home" / "config" / "profiles"
    (users / "mine.yaml").mkdir(parents=True)
    refused(cli("render", "-P", "mine"), "is a directory")


def test_alias_bomb_fails_fast_in_bounded_memory(tmp_path: Path) -> None:
    small = BOMB.splitlines()[0]  # the same first line, without the aliases that multiply it
    limit = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
        "sys.argv[0] = 'hpctrain'; from hpctrain.cli import main; main()"
    )
    env = {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")}

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", limit, *args], capture_output=True,
                              text=True, timeout=120, env=env, cwd=tmp_path)

    def argvs(text: str, name: str) -> list[list[str]]:
        (tmp_path / f"{name}.yaml").write_text(text)
        (tmp_path / f"{name}-cfg.yaml").write_text(text)
        flow = "{" + text.replace("\n", ", ") + "}"
        return [["render", "-P", str(tmp_path / f"{name}.yaml")],
                ["train", "--config", str(tmp_path / f"{name}-cfg.yaml"), "--print-config"],
                ["train", "--set", f"custom.module_kwargs={flow}", "--print-config"]]

    for plain, bomb in zip(argvs(small, "small"), argvs(BOMB, "bomb"), strict=True):
        # The baseline: the same command reading the small file, under the same load.
        _, baseline = timed(run, plain)
        r, took = timed(run, bomb)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "Error:" in r.stderr and "expands to more than" in r.stderr
        assert_prompt(took, baseline, " ".join(bomb[:2]))


def test_corrupted_profile_cache_is_rebuilt(cli: Cli, _home: Path) -> None:
    assert cli("render", "-P", "local").code == 0
    (cached,) = (_home / "state" / "cache" / "profiles").glob("*.json")
    good = cli("render", "-P", "local").out
    doc = json.loads(cached.read_text())
    doc["profile"]["environment"]["setup"] = ["echo \ud800"]
    corruptions = [
        lambda p: p.write_bytes(b"\xff\x00 not json"),
        lambda p: p.write_text("[" * 100_000),
        lambda p: p.write_text(json.dumps(doc)),  # a lone surrogate, as JSON writes it
        lambda p: p.mkdir(),
        lambda p: os.mkfifo(p),
    ]
    for corrupt in corruptions:
        if cached.is_dir():
            cached.rmdir()
        cached.unlink(missing_ok=True)
        corrupt(cached)
        if cached.is_file():
            cached.chmod(0o600)
        r = cli("render", "-P", "local")
        assert r.code == 0 and r.out == good, r.err


# Class 1: numbers too large, and render -o where it cannot write.


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--mem", HUGE], ["--mem", "larger than any node"]),
        (["--mem", HUGE + "G"], ["--mem", "larger than any node"]),
        (["--mem", "100K"], ["less than 1 MB"]),
        (["--time", HUGE], ["--time", "far too large"]),
        (["--time", "99999-00:00:00"], ["over the limit"]),
        (["--nodes", "-3"], ["at least 1 node"]),
        (["--nodes", "1" + "0" * 20], ["at most 2 node(s)"]),
        (["--gpus-per-node", "9" * 4000, "--nodes", "9" * 4000], ["(4000 digits) GPUs"]),
        (["--gpus-per-node", "-1"], ["must be 0 or more"]),
        (["--cpus-per-task", "9" * 4299], ["CPUs per node, but"]),
        (["--cpus-per-task", "-" + "9" * 4299], ["thousands of digits"]),
    ],
)
def test_numbers_out_of_any_range(cli: Cli, args: list[str], words: list[str]) -> None:
    refused(cli("render", "-P", "local", *args), *words)


def test_usage_errors_exit_2(cli: Cli) -> None:
    r = cli("render", "-P", "local", "--nodes", "9" * 5000)
    assert r.code == 2 and "Traceback" not in r.err and "--nodes" in r.err


def test_render_o_where_it_cannot_write(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    (tmp_path / "afile").write_text("mine too")
    before = _files(tmp_path)
    refused(cli("render", "-P", "local", "-o", "missing/job.sh"), "does not exist", "mkdir -p")
    refused(cli("render", "-P", "local", "-o", "out"), "is a directory", "out/job.sh")
    refused(cli("render", "-P", "local", "-o", "afile/job.sh"), "is a file")
    refused(cli("render", "-P", "local", "-o", "afile", "--gpus-per-node", "9"), "impossible")
    # An existing file is kept unless --force says to replace it (as `profiles discover -o`).
    refused(cli("render", "-P", "local", "-o", "afile"), "afile exists", "--force")
    assert _files(tmp_path) == before  # nothing written, nothing lost, no temporary file
    assert cli("render", "-P", "local", "-o", "afile", "--force").code == 0
    assert (tmp_path / "afile").read_text().startswith("#!/bin/bash")


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_render_o_hostile_names(cli: Cli, tmp_path: Path, name: str) -> None:
    r = cli("render", "-P", "local", "-o", name)
    assert r.code == 0, r.err
    assert (tmp_path / name).read_text().startswith("#!/bin/bash")
    subprocess.run(["bash", "-n", str(tmp_path / name)], check=True)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED.sh").exists()


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_submit_dry_run_hostile_config_paths(cli: Cli, tmp_path: Path, name: str) -> None:
    refused(cli("submit", "-P", "local", "--config", name, "--dry-run"), "does not exist")
    (tmp_path / name).write_text("seed: 3\n")
    r = cli("submit", "-P", "local", "--config", name, "--dry-run")
    assert r.code == 0, r.err
    assert not (tmp_path / "hpctrain-runs").exists()
    script = tmp_path / "dry.sh"
    script.write_text(r.out)
    subprocess.run(["bash", "-n", str(script)], check=True)
    # The job runs the file's settings, not the file: its name never reaches the command.
    launch = next(line for line in r.out.splitlines() if "-m hpctrain.trainer" in line)
    assert "--task spiral --set seed=3 " in launch and "dash" not in launch


def test_markup_and_bytes_in_arguments(cli: Cli, tmp_path: Path) -> None:
    refused(cli("render", "-P", "/tmp/[/x]/[bold]p.yaml"), "/tmp/[/x]/[bold]p.yaml")
    for args in (["-J", "\udcff"], ["-e", "A=\udcff"], ["--", "python", "\udcff"]):
        refused(cli("render", "-P", "local", *args), "not UTF-8", fix=False)
    # A file name's raw bytes are fine for -o; run for real: stderr escapes what it prints.
    r = subprocess.run([sys.executable, "-m", "hpctrain", "render", "-P", "local", "-o",
                        os.fsdecode(b"\xff.sh")], capture_output=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / os.fsdecode(b"\xff.sh")).read_bytes().startswith(b"#!/bin/bash")


def test_unexpected_errors_print_no_traceback(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hpctrain.render.script as prepare

    def broken(*args: object, **kw: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(prepare, "plan_script", broken)
    refused(cli("render", "-P", "local"), "unexpected ZeroDivisionError: a bug", "--debug")
    with pytest.raises(ZeroDivisionError):
        cli("--debug", "render", "-P", "local")


# Class 2: validation gaps.


@pytest.mark.parametrize("profile", ["raven", "gilbreth", "marvin", "local"])
def test_every_shipped_partition_bounds_its_nodes(cli: Cli, profile: str) -> None:
    from hpctrain.profiles import load_profile

    prof = load_profile(profile)
    assert all(p.max_nodes for p in prof.partitions)
    for part in prof.partitions:
        r = cli("render", "-P", profile, "-A", "acc", "--partition", part.name,
                "--nodes", str(10**20))
        refused(r, f"at most {part.max_nodes} node(s)")


def test_profile_without_max_nodes_is_refused(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("name: p\ncluster: c\npartitions:\n  - {name: a, gpus_per_node: 1, "
                 "cpus_per_node: 4, mem_per_node_mb: 1000, max_time: '1:00:00'}\n")
    refused(cli("render", "-P", str(f), "--nodes", str(10**20)),
            f"{f}:4: partitions[name=a].max_nodes: required field missing", "max_nodes: 4")


def test_zero_gpus_get_a_share_or_a_refusal(cli: Cli) -> None:
    err = refused(cli("render", "-P", "raven", "--gpus-per-node", "0"),
                  "0 GPUs per node is not allowed (only 1, 2, 4)", "Fix: --gpus-per-node 1 is")
    assert "--mem 0" not in err
    err = refused(cli("render", "-P", "raven", "--gpus-per-node", "0", "--mem", "abc"),
                  "invalid memory 'abc'")
    assert "--mem 0" not in err
    refused(cli("render", "-P", "gilbreth", "-A", "a", "--gpus-per-node", "0"), "for GPU jobs")
    refused(cli("render", "-P", "marvin", "-A", "a", "--gpus-per-node", "0"), "for GPU jobs")
    r = cli("render", "-P", "local", "--gpus-per-node", "0")
    assert r.code == 0, r.err
    assert "#SBATCH --mem=2000\n" in r.out and "#SBATCH --cpus-per-task=2\n" in r.out
    assert "--gres" not in r.out and "#SBATCH --mem=0" not in r.out


def test_dry_run_fails_where_submit_fails(cli: Cli, tmp_path: Path, _home: Path) -> None:
    refused(cli("submit", "-P", "local", "--config", "nope.yaml", "--dry-run"),
            "--config", "does not exist")
    (tmp_path / "bad.yaml").write_text("trainer: {max_epochs: -1}\n")
    refused(cli("submit", "-P", "local", "--config", "bad.yaml", "--dry-run"),
            "trainer.max_epochs")
    (tmp_path / "blocked").write_text("a file where the runs would go")
    users = _home / "config" / "profiles"
    users.mkdir(parents=True)
    (users / "loc.yaml").write_text("extends: local\noutput_dir: blocked/runs\n")
    refused(cli("submit", "-P", "loc", "--dry-run"), "cannot create the run directory")


def test_profile_extending_itself(cli: Cli, _home: Path) -> None:
    users = _home / "config" / "profiles"
    users.mkdir(parents=True)
    (users / "foo.yaml").write_text("extends: foo\n")
    err = refused(cli("render", "-P", "foo"), "extends itself")
    assert "unknown profile" not in err
    (users / "raven.yaml").write_text("extends: raven\ndefault_account: x\n")
    assert cli("render", "-P", "raven").code == 0


def test_huge_multi_node_request_on_raven(cli: Cli) -> None:
    r = cli("render", "-P", "raven", "--nodes", "9" * 4299, "--gpus-per-node", "2")
    refused(r, "must use whole nodes", "at most 80 node(s)")

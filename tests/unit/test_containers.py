"""Jobs in containers (docs/containers.md): the profiles' runtimes, the plan's rule, the
rendered wrapper (golden files: Apptainer on each shipped cluster, pyxis, Charliecloud)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.profiles.model import ContainerRuntime, Containers, Profile
from hpctrain.render.script import render_script
from tests.unit.test_render import ACCOUNT, _check_golden

HOSTILE = "/tmp/my images/it's; $(touch /tmp/pwned) `id` -x.sif"


def _with(profile: str, *runtimes: str) -> Profile:
    return dataclasses.replace(load_profile(profile), containers=Containers(
        [ContainerRuntime(name=r) for r in runtimes]))  # type: ignore[arg-type]


def _plan(profile: Profile | str, **kw: Any) -> Any:
    prof = load_profile(profile) if isinstance(profile, str) else profile
    kw.setdefault("account", ACCOUNT.get(prof.name))
    return build_plan(JobRequest(profile=prof, python_env="/opt/venv", **kw), suggest=False)


def _script(profile: Profile | str, **kw: Any) -> str:
    return render_script(_plan(profile, **kw))


def test_the_shipped_profiles_offer_apptainer_and_the_dev_cluster_charliecloud() -> None:
    for name in ("raven", "gilbreth", "marvin"):
        assert [r.name for r in load_profile(name).containers.runtimes] == ["apptainer"]
    assert load_profile("local").containers.runtime(None).name == "charliecloud"  # type: ignore[union-attr]


def test_a_profile_names_each_runtime_once() -> None:
    with pytest.raises(ValueError, match="duplicate container runtimes: apptainer"):
        Containers([ContainerRuntime(name="apptainer"), ContainerRuntime(name="apptainer")])


def test_the_plan_takes_the_profiles_first_runtime_and_the_gpu_flag_from_the_gpus() -> None:
    box = _plan("raven", container="/x.sif").container
    assert (box.runtime, box.gpus, box.python) == ("apptainer", True, "job")
    assert box.head() == ("apptainer", "exec", "--nv")
    cpu = _plan("local", container="/img", gpus_per_node=0).container
    assert cpu.head() == ("ch-run",) and cpu.tail() == ("/img", "--")
    assert _plan("raven").container is None


@pytest.mark.parametrize(("kw", "words"), [
    ({"container": "/x.sif", "container_runtime": "pyxis"},
     "profile raven does not offer pyxis; it offers apptainer"),
    ({"container_python": "image"}, "--container-python applies to a job in a container"),
    ({"container": "/x.sif", "container_binds": ("data:/data",)}, "give SRC:DST as absolute"),
    ({"container": "/x.sif", "container_binds": ("/a,b",)}, "a path with a comma"),
    ({"container": "/x.sif", "container_python": "conda"}, "give job (the job's own"),
    ({"container": "/x\n.sif"}, "control character"),
])
def test_the_plan_refuses_what_the_cluster_or_a_script_cannot_hold(kw: dict[str, Any],
                                                                   words: str) -> None:
    with pytest.raises(PlanError) as e:
        _plan("raven", **kw)
    assert words in str(e.value)


def test_a_profile_without_runtimes_refuses_a_container_and_says_where_they_are_named() -> None:
    with pytest.raises(PlanError, match="offers none"):
        _plan(_with("raven"), container="/x.sif")


def test_the_runtimes_module_is_loaded_after_the_profiles_own() -> None:
    prof = dataclasses.replace(load_profile("raven"), containers=Containers(
        [ContainerRuntime(name="apptainer", modules=["apptainer/1.3"])]))
    assert _plan(prof, container="/x.sif").modules == ("gcc/13", "cuda/12.6", "apptainer/1.3")


GOLDEN: dict[str, dict[str, Any]] = {
    # Apptainer on each shipped cluster: `apptainer exec --nv --bind SRC IMAGE CMD`, one rank a
    # task (docs/containers.md lists each line's source).
    "container-raven-apptainer": dict(profile="raven", nodes=2, container="/u/me/pytorch.sif"),
    "container-gilbreth-apptainer": dict(profile="gilbreth", nodes=1, gpus_per_node=2,
                                         container="/scratch/gilbreth/me/pytorch.sif",
                                         container_binds=("/depot/lab/data:/data",)),
    "container-marvin-apptainer": dict(profile="marvin", nodes=2, container="/home/me/pt.sif",
                                       container_python="image"),
    "container-local-charliecloud": dict(profile="local", nodes=2, container="/img/deb 13"),
    "container-raven-torchrun-apptainer": dict(profile="raven", nodes=2, launcher="torchrun",
                                               container="/u/me/pytorch.sif"),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name: str, tmp_path: Path) -> None:
    kw = dict(GOLDEN[name])
    _check_golden(name, _script(kw.pop("profile"), **kw), tmp_path)


def test_golden_pyxis(tmp_path: Path) -> None:
    text = _script(_with("raven", "pyxis"), nodes=2, container="nvcr.io#nvidia/pytorch:24.01-py3",
                   container_binds=("/ptmp/me:/data",))
    _check_golden("container-raven-pyxis", text, tmp_path)
    assert ('srun "${hpctrain_container_srun[@]}" --kill-on-bad-exit=1' in text)


def test_an_image_by_uri_is_not_looked_for_as_a_path() -> None:
    text = _script("raven", nodes=2, container="docker://nvcr.io/nvidia/pytorch:24.01-py3")
    assert "container image not found" not in text and "command -v apptainer" in text
    assert "container image not found" in _script("raven", nodes=2, container="/u/me/pt.sif")


def test_a_job_without_a_container_has_no_container_line() -> None:
    assert "hpctrain_container" not in _script("raven", nodes=2)


def _container_words(text: str, tmp_path: Path) -> list[str]:
    """The wrapper's words as bash builds them, run on this machine with the script's lines."""
    start = text.index("# Each path once")
    end = text.index("# The launcher's wrapper")
    lines = text[start:end]
    lines = re.sub(r"(?ms)^if ! command -v .*?^fi\n^if \[ ! -e .*?^fi\n", "", lines)
    probe = tmp_path / "probe.sh"
    probe.write_text("set -eo pipefail\nHPCTRAIN_RUN_DIR=/runs/r1\nhpctrain_site=''\n"
                     + lines + 'printf "%s\\0" "${hpctrain_container[@]}"\n')
    out = subprocess.run(["bash", str(probe)], capture_output=True, check=True, cwd=tmp_path)
    return out.stdout.decode().split("\0")[:-1]


def test_a_hostile_image_path_arrives_whole_and_inert(tmp_path: Path) -> None:
    text = _script("local", nodes=2, container=HOSTILE, container_binds=("/a b:/c;d",))
    words = _container_words(text, tmp_path)
    assert words[0] == "ch-run" and words[-2:] == [HOSTILE, "--"]
    at = words.index("/a b:/c;d")
    assert words[at - 1] == "-b"
    assert not Path("/tmp/pwned").exists()


def test_apptainer_binds_the_run_directory_and_keeps_the_jobs_path(tmp_path: Path) -> None:
    words = _container_words(_script("raven", nodes=2, container="/u/me/pt.sif"), tmp_path)
    assert words[:3] == ["apptainer", "exec", "--nv"] and words[-1] == "/u/me/pt.sif"
    assert "/runs/r1" in words and "--pwd" in words
    assert any(w.startswith("PATH=") for w in words)


def test_the_cli_takes_the_container_options_from_the_job_option_table() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["render", "--profile", "raven", "--nodes", "2", "--container",
                                 "/u/me/pt.sif", "--container-runtime", "apptainer",
                                 "--container-bind", "/ptmp/me:/data", "--container-python",
                                 "image"])
    assert result.exit_code == 0, result.output
    assert "'/ptmp/me:/data'" in result.output or "/ptmp/me:/data" in result.output
    asked_apart = [
        ["submit", "--profile", "raven", "--container-python", "image", "--container-runtime",
         "apptainer", "--container-bind", "/a", "--dry-run"],
        ["dev", "--profile", "raven", "--container-python", "image", "--container-runtime",
         "apptainer", "--container-bind", "/a", "--dry-run"],
        ["sweep", "--profile", "raven", "--grid", "optim.lr=0.1,0.03", "--container-python",
         "image", "--container-runtime", "apptainer", "--container-bind", "/a", "--dry-run"],
    ]
    for argv in asked_apart:
        refused = runner.invoke(app, argv)
        assert refused.exit_code == 1, refused.output
        assert "applies to a job in a container" in str(refused.exception), argv
    # --container itself, on each command that submits: the plan takes it (the dry run's JSON).
    for argv in (["submit", "--profile", "raven", "--container", "/u/me/pt.sif", "--dry-run",
                  "--json"],
                 ["sweep", "--profile", "raven", "--grid", "optim.lr=0.1,0.03", "--container",
                  "/u/me/pt.sif", "--dry-run", "--json"],
                 ["dev", "--profile", "raven", "--container", "/u/me/pt.sif", "--dry-run",
                  "--json"]):
        shown = runner.invoke(app, argv)
        assert "/u/me/pt.sif" in shown.output, (argv, shown.output, shown.exception)

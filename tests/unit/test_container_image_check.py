"""Submit checks a container image given as a path where the job is submitted to (issue 56,
docs/containers.md): the plan lists the paths, the place answers which are missing. Here the
pure parts, this machine's place, and the login's command run by a real sh; a real submit is
tests/containers/test_container_image_cluster.py, a real login
tests/remote/test_container_login.py."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.places import LocalPlace
from hpctrain.places.loginfiles import exists_command, missing_answer
from hpctrain.plan import JobRequest
from hpctrain.plan.container import anchored
from hpctrain.profiles import load_profile
from hpctrain.profiles.model import ContainerRuntime, Containers, Profile
from hpctrain.submission.crossrace import CrossRace
from hpctrain.submission.pipeline import require_paths
from hpctrain.submission.planned import image_paths
from hpctrain.submission.prepare import prepare
from tests.unit.inproc import Cli, in_process

# Every way a path could leave its quotes: a quote, spaces, $(), backticks, ;, a leading -.
HOSTILE = ["-rf it's $(touch pwned) `touch pwned`; touch pwned .sif", "!", "-e", "(",
           "a\\b \"c\"", "-"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(monkeypatch, capsys)


def _profile(*runtimes: str) -> Profile:
    return dataclasses.replace(load_profile("local"), containers=Containers(
        [ContainerRuntime(name=r) for r in runtimes]))  # type: ignore[arg-type]


def _request(image: str | None, profile: Profile | None = None, **kw: Any) -> JobRequest:
    return JobRequest(profile=profile or load_profile("local"), command=("true",),
                      container=image, **kw)


@pytest.mark.parametrize(("image", "expected"), [
    ("img.sif", "/proj x/img.sif"),
    ("./images/it's a.sif", "/proj x/images/it's a.sif"),
    ("../shared/img", "/proj x/../shared/img"),
    ("/abs/img.sif", "/abs/img.sif"),
    ("~/img.sif", "~/img.sif"),
    ("docker://nvcr.io/nvidia/pytorch:24.01-py3", "docker://nvcr.io/nvidia/pytorch:24.01-py3"),
])
def test_a_relative_image_path_is_the_projects(image: str, expected: str) -> None:
    # The job's ranks start in the code snapshot, not where the user typed the path.
    assert anchored(_request(image), Path("/proj x")).container == expected


def test_what_is_no_path_is_left_as_given() -> None:
    pyxis = _request("nvcr.io#nvidia/pytorch:24.01-py3", _profile("pyxis"))
    assert anchored(pyxis, Path("/p")) is pyxis
    for req in (_request(None), _request(""), _request("x", _profile()),
                _request("x", container_runtime="apptainer")):
        # No image, or one the plan refuses anyway (no runtime): its own problem says so.
        assert anchored(req, Path("/p")) is req


def test_prepare_writes_and_lists_the_absolute_image(tmp_path: Path) -> None:
    prep = prepare(_request("img dir/it's.sif"), tmp_path)
    image = str(tmp_path / "img dir" / "it's.sif")
    assert prep.plan.container is not None and prep.plan.container.image == image
    assert prep.needed_paths() == (image,)
    assert "container image not found" in prep.script and "it'\"'\"'s.sif" in prep.script
    assert prepare(_request(None), tmp_path).needed_paths() == ()
    pyxis = prepare(_request("nvcr.io#nvidia/pytorch:24.01-py3", _profile("pyxis")), tmp_path)
    assert pyxis.needed_paths() == ()


def test_each_image_is_checked_once(tmp_path: Path) -> None:
    one = prepare(_request("/a.sif"), tmp_path)
    two = prepare(_request("/b.sif"), tmp_path)
    assert image_paths([*one.scripts(), *two.scripts(), *one.scripts()]) == ("/a.sif", "/b.sif")
    # A race across profiles checks each leg at its own place, as the leg is queued.
    assert CrossRace("1x1@local", ()).needed_paths() == ()


def test_this_machine_says_which_paths_are_missing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    there = [str(tmp_path / h) for h in HOSTILE]
    for path in there:
        Path(path).write_text("")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "img x.sif").mkdir()
    gone = [p + ".gone" for p in there]
    place = LocalPlace(workdir=tmp_path)
    asked = [there[0], gone[0], "~/img x.sif", "~/none.sif", *there[1:], *gone[1:]]
    assert place.paths_missing(asked) == [gone[0], "~/none.sif", *gone[1:]]
    assert place.paths_missing([]) == []
    assert not list(tmp_path.rglob("pwned"))


def test_the_logins_command_keeps_every_path_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "it's.sif").write_text("")
    there = [str(tmp_path / h) for h in HOSTILE]
    for path in there:
        Path(path).write_text("")
    asked = [*there, *(p + "x" for p in there), "~/it's.sif", "~/gone.sif",
             "-e", "!", "relative"]
    done = subprocess.run(["sh", "-c", exists_command(asked)], capture_output=True,
                          cwd=tmp_path / "home", env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    # A login's start-up files may print to stdout: only the marked lines count.
    said = missing_answer(asked, b"Welcome to the cluster 1\n" + done.stdout)
    assert said == [*(p + "x" for p in there), "~/gone.sif", "-e", "!", "relative"]
    assert not list(tmp_path.rglob("pwned"))


def test_a_missing_image_is_refused_with_its_path(tmp_path: Path) -> None:
    missing = str(tmp_path / HOSTILE[0])
    prep = prepare(_request(missing), tmp_path)
    with pytest.raises(HpctrainError) as caught:
        require_paths(prep, LocalPlace(workdir=tmp_path))
    assert caught.value.what.startswith(f"container image {missing} does not exist here: ")
    assert caught.value.fix is not None and "--container" in caught.value.fix
    Path(missing).write_text("")
    require_paths(prep, LocalPlace(workdir=tmp_path))


def test_render_keeps_a_relative_image_and_checks_nothing(cli: Cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # `render` writes a script for elsewhere: the path is read where that script runs.
    monkeypatch.chdir(tmp_path)
    ran = cli("render", "--profile", "local", "--container", "images/none.sif", "--", "true")
    assert ran.code == 0, ran.err
    assert "image images/none.sif." in ran.out and str(tmp_path) not in ran.out

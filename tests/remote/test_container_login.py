"""A container image given as a path is checked on the login before the job is queued (issue
56, docs/containers.md): one command over the master, each path arriving whole."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpctrain.places.login import LoginPlace
from hpctrain.remote.connection import Connection, Target
from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd

# A quote, spaces, $(), backticks, ; and a leading - (a bare name: test's operator position).
HOSTILE = "-rf it's $(touch pwned) `touch pwned`; touch pwned \"x\" .sif"


@pytest.fixture
def login(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoginPlace]:
    """This process's own master to `sshd` (its socket under a home of the test's)."""
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "h"))
    conn = Connection(Target.of(sshd.host, str(sshd.client_config)), sshd.host)
    conn.open("60")
    try:
        yield LoginPlace(conn, local_root=tmp_path)
    finally:
        conn.close()


def test_the_login_names_the_missing_paths_in_one_round_trip(login: LoginPlace, sshd: Sshd
                                                             ) -> None:
    images = sshd.remote_home / "images 'q'"
    images.mkdir()
    there = [images / HOSTILE, images / "-", images / "dir image"]
    there[0].write_text("")
    there[1].write_text("")
    there[2].mkdir()
    gone = [images / (HOSTILE + ".gone"), images / "none.sif"]
    asked = [str(there[0]), str(gone[0]), str(there[1]), str(gone[1]), str(there[2])]
    trips, commands = login.conn.round_trips, len(sshd.commands())
    assert login.paths_missing(asked) == [str(gone[0]), str(gone[1])]
    assert login.conn.round_trips == trips + 1
    (sent,) = sshd.commands()[commands:]
    assert sent.count("[ -e ") == len(asked)
    assert login.paths_missing([]) == [] and login.conn.round_trips == trips + 1
    assert not list(sshd.root.rglob("pwned")) and not (Path.home() / "pwned").exists()


def _logged_in(sshd: Sshd, laptop: Callable[..., Laptop]) -> tuple[Laptop, Path]:
    workdir = sshd.remote_home / "proj 'q' $(touch pwned); x"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    return lap, workdir


def test_submit_through_the_login_refuses_an_image_it_lacks(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop]
) -> None:
    lap, workdir = _logged_in(sshd, laptop)
    # In the laptop's project, but in data/, which .gitignore keeps from the login.
    (lap.project / "data" / HOSTILE).write_text("")
    name = "image-check-login"
    before = len(sshd.commands())
    res = lap("submit", "--profile", "remote", "--job-name", name, "--container",
              f"data/{HOSTILE}", "--", "true")
    assert res.returncode == 1, res.stdout
    assert (f"Error: container image {workdir}/data/{HOSTILE} does not exist on testlogin"
            in res.stderr), res.stderr
    assert "Traceback" not in res.stderr
    checks = [c for c in sshd.commands()[before:] if "@@hpctrain-missing" in c]
    assert len(checks) == 1 and not any("sbatch" in c for c in sshd.commands()[before:])
    assert not (workdir / "hpctrain-runs").exists()
    assert json.loads(lap.ok("status", "--json").stdout)["jobs"] == []
    # Tracked, so synced: there on the login, and the job goes on (held, then cancelled).
    (lap.project / "images").mkdir()
    (lap.project / "images" / HOSTILE).write_text("")
    res = lap.ok("submit", "--profile", "remote", "--job-name", name, "--container",
                 f"images/{HOSTILE}", "--sbatch-arg=--hold", "--json", "--", "true")
    done = json.loads(res.stdout)
    assert done["plan"]["container"]["image"] == f"{workdir}/images/{HOSTILE}"
    lap.ok("cancel", str(done["job_id"]))
    assert not list(sshd.root.rglob("pwned")) and not list(lap.project.rglob("pwned"))

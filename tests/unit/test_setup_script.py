"""scripts/setup.sh never deletes a .venv it did not make (newcomer review 2026-11-29, 1: the
README's Install into .venv, then ./scripts/demo.sh, lost the user's torch). Run on a copy of
the scripts, with a .venv of the user's own holding a file of theirs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "mine.txt"


def _checkout(tmp_path: Path) -> Path:
    """The files setup.sh reads, and a dpkg-query that finds every package installed (the
    Debian step is not what is tested, and must not need root here)."""
    repo = tmp_path / "clone"
    (repo / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "requirements.py", "cache-dir.sh"):
        shutil.copy(ROOT / "scripts" / name, repo / "scripts" / name)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpkg-query").write_text("#!/bin/sh\necho 'install ok installed'\n")
    (fake / "dpkg-query").chmod(0o755)
    return repo


def _setup(repo: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=repo, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
        env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
             "HPCTRAIN_CACHE_DIR": str(tmp_path / "cache"), "CI": "true", **env})


def _user_venv(repo: Path) -> Path:
    venv = repo / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / MARKER).write_text("a researcher's file\n")
    return venv


def test_a_venv_it_did_not_make_that_lacks_hpctrain_is_left_as_it_is(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    venv = _user_venv(repo)
    before = sorted(p.relative_to(venv) for p in venv.rglob("*"))
    res = _setup(repo, tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert (venv / MARKER).read_text() == "a researcher's file\n"
    assert sorted(p.relative_to(venv) for p in venv.rglob("*")) == before
    assert "was not made by this script" in res.stderr and "left as it is" in res.stderr
    assert "pip install -e '.[train,dev]'" in res.stderr and "mv .venv .venv.mine" in res.stderr
    # Stopped before anything else: no shared venv was built for it.
    assert not (tmp_path / "cache").exists()


def test_a_venv_of_ones_own_with_hpctrain_and_its_requirements_is_used_as_it_is(
    tmp_path: Path,
) -> None:
    repo = _checkout(tmp_path)
    venv = repo / ".venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"no venv module here: {made.stderr.strip()}")
    (venv / MARKER).write_text("a researcher's file\n")
    # Everything this test's environment has (hpctrain, torch, the tools), as pip would have
    # put it there: its site directory read through a .pth.
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    here = sysconfig.get_paths()["purelib"]
    Path(site, "theirs.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    (venv / "bin" / "hpctrain").write_text("#!/bin/sh\nexit 0\n")
    (venv / "bin" / "hpctrain").chmod(0o755)
    res = _setup(repo, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "using it as it is" in res.stdout and "nothing in it is changed" in res.stdout
    assert (venv / MARKER).read_text() == "a researcher's file\n"
    assert not (venv / ".hpctrain-setup.stamp").exists()
    assert not (tmp_path / "cache").exists()
    # A requirement missing there: named, and the .venv still kept.
    res = _setup(repo, tmp_path, HPCTRAIN_SETUP_EXTRAS="train dev plot")
    assert res.returncode == 0, res.stderr  # matplotlib is a dev requirement too: it is there
    Path(site, "theirs.pth").unlink()
    res = _setup(repo, tmp_path, HPCTRAIN_SETUP_EXTRAS="train")
    assert res.returncode == 1 and "lacks: hpctrain typer" in res.stderr, res.stderr
    assert "pip install -e '.[train]'" in res.stderr
    assert (venv / MARKER).exists() and (venv / "bin" / "hpctrain").exists()

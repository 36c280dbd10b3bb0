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


def _keys(repo: Path, tmp_path: Path) -> dict[str, str]:
    res = subprocess.run(["bash", "scripts/setup.sh", "--keys"], cwd=repo, capture_output=True,
                         text=True, timeout=60, check=True,
                         env={**os.environ, "HPCTRAIN_CACHE_DIR": str(tmp_path / "cache")})
    return dict(line.split() for line in res.stdout.splitlines())


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


SCRIPTS = '[project.scripts]\nhpctrain = "hpctrain.__main__:main"\n'
EXTRA = SCRIPTS + 'hpctrain-extra = "hpctrain.__main__:main"\n'


def test_the_stamps_change_with_what_each_venv_is_built_from(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    toml, setup = repo / "pyproject.toml", repo / "scripts" / "setup.sh"
    first = _keys(repo, tmp_path)
    assert set(first) == {"deps", "venv"}
    # A tool's setting installs nothing; a comment in the recipe builds nothing.
    _edit(toml, "line-length = 100", "line-length = 99")
    _edit(setup, "# What says that this script made .venv", "# What says this script made .venv")
    _edit(setup, '  echo "$say making .venv', '  # a comment\n  echo "$say making .venv')
    assert _keys(repo, tmp_path) == first
    # A console script: the clone's .venv, not the shared dependencies.
    _edit(toml, SCRIPTS, EXTRA)
    scripts = _keys(repo, tmp_path)
    assert scripts["deps"] == first["deps"] and scripts["venv"] != first["venv"]
    # The recipe of the .venv, then of the shared venv (which the .venv's stamp holds too).
    _edit(setup, "--no-deps \\\n    --no-build-isolation -e .", "--no-deps -e .")
    recipe = _keys(repo, tmp_path)
    assert recipe["deps"] == first["deps"] and recipe["venv"] != scripts["venv"]
    _edit(setup, '"${pip[@]}" "$torch_pin"', '"${pip[@]}" --pre "$torch_pin"')
    deps_recipe = _keys(repo, tmp_path)
    assert deps_recipe["deps"] != first["deps"] and deps_recipe["venv"] != recipe["venv"]
    # A dependency.
    _edit(toml, '"rich>=13"', '"rich>=14"')
    assert _keys(repo, tmp_path)["deps"] != deps_recipe["deps"]


def _shared_deps_venv() -> Path:
    """The venv this test's hatchling and pip come from: the one setup.sh made, or one's own."""
    import hatchling

    root = Path(hatchling.__file__).resolve().parents[4]
    if not (root / "bin" / "python").exists():
        pytest.skip(f"hatchling is not in a venv here ({root})")
    return root


def test_a_new_console_script_remakes_the_venv_it_made(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    # What an editable install reads: the package, the readme, the wheel's forced includes.
    (repo / "hpctrain").mkdir()
    (repo / "hpctrain" / "__init__.py").write_text("")
    shutil.copy(ROOT / "README.md", repo / "README.md")
    (repo / "templates").mkdir()
    (repo / "cluster_profiles").mkdir()
    # The shared dependencies are this test's own, not built again.
    (tmp_path / "cache" / "venv").mkdir(parents=True)
    (tmp_path / "cache" / "venv" / _keys(repo, tmp_path)["deps"]).symlink_to(_shared_deps_venv())
    res = _setup(repo, tmp_path)
    assert res.returncode == 0 and "making .venv" in res.stdout, res.stdout + res.stderr
    assert (repo / ".venv" / "bin" / "hpctrain").exists()
    assert "up to date" in _setup(repo, tmp_path).stdout
    _edit(repo / "pyproject.toml", SCRIPTS, EXTRA)
    res = _setup(repo, tmp_path)
    assert res.returncode == 0 and "making .venv" in res.stdout, res.stdout + res.stderr
    assert (repo / ".venv" / "bin" / "hpctrain-extra").exists()

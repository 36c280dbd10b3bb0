"""A core install (no `train` extra): `train` and `submit` of the packaged trainer say what to
install instead of failing as a bug, or in the job after it waited in the queue.

Lightning is made unimportable for real: a sitecustomize on PYTHONPATH puts a finder first on
sys.meta_path that refuses it, in a Python of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.submission.prepare import Prepared, prepare
from hpctrain.submission.submit import TRAINER_EXTRA, check_trainer_python

BLOCKER = """\
import sys

class _NoLightning:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "lightning":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoLightning())
"""


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    folder = tmp_path / "no lightning"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return folder


@pytest.fixture
def core_env(tmp_path: Path, blocker: Path) -> Path:
    """An environment whose python is this one without Lightning (a core-only install)."""
    env = tmp_path / "core env"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(f"#!/bin/sh\nexport PYTHONPATH='{blocker}'\nexec '{sys.executable}' \"$@\"\n")
    python.chmod(0o755)
    return env


def _hpctrain(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HPCTRAIN_HOME": str(cwd / "home"), **env}
    full.pop("SLURM_CONF", None)
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_extra_named_in_the_fix_installs_lightning() -> None:
    name = TRAINER_EXTRA.removeprefix("hpctrain[").removesuffix("]")
    wanted = [r for r in metadata.requires("hpctrain") or []
              if r.replace('"', "'").endswith(f"extra == '{name}'")]
    assert any(r.startswith("lightning") for r in wanted), wanted
    assert any(r.startswith("torch") for r in wanted), wanted


def test_train_without_lightning_says_what_to_install(tmp_path: Path, blocker: Path) -> None:
    res = _hpctrain(tmp_path, "train", "--task", "spiral", "--max-epochs", "1",
                    PYTHONPATH=str(blocker))
    assert res.returncode == 1, res.stderr
    assert "cannot import lightning" in res.stderr and "bug" not in res.stderr
    assert f"-m pip install '{TRAINER_EXTRA}'" in res.stderr
    assert "Traceback" not in res.stderr


def test_submit_refuses_a_job_python_without_lightning(tmp_path: Path, core_env: Path) -> None:
    res = _hpctrain(tmp_path, "submit", "--profile", "local", "--python-env", str(core_env),
                    "--time", "5")
    assert res.returncode == 1, res.stderr
    assert f"Error: the job's Python {core_env}/bin/python cannot import lightning" in res.stderr
    assert f"pip install '{TRAINER_EXTRA}'" in res.stderr and "--python-env" in res.stderr
    # Refused before anything was written or queued.
    assert not (tmp_path / "hpctrain-runs").exists() or not any(
        (tmp_path / "hpctrain-runs").iterdir())


def _prepared(tmp_path: Path, python_env: str, command: tuple[str, ...] = ()) -> Prepared:
    req = JobRequest(profile=load_profile("local"), python_env=python_env, command=command,
                     invocation="test")
    return prepare(req, tmp_path)


def test_the_check_passes_where_the_trainer_imports(tmp_path: Path) -> None:
    check_trainer_python(_prepared(tmp_path, sys.prefix), LocalPlace())


def test_the_check_fails_where_it_does_not(tmp_path: Path, core_env: Path) -> None:
    with pytest.raises(HpctrainError, match="cannot import lightning"):
        check_trainer_python(_prepared(tmp_path, str(core_env)),
                             LocalPlace())
    # The user's own command: not the trainer's business.
    check_trainer_python(_prepared(tmp_path, str(core_env), ("python", "t.py")),
                         LocalPlace())


def test_a_python_env_without_python_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty env"
    empty.mkdir()
    with pytest.raises(HpctrainError, match="does not run here") as e:
        check_trainer_python(_prepared(tmp_path, str(empty)), LocalPlace())
    assert e.value.fix and "--python-env" in e.value.fix

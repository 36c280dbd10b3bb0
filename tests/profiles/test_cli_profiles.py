"""`profiles discover|check|probe` refuse bad input and a missing SLURM clearly (no cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run(tmp_path: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("args", [["profiles", "discover"], ["profiles", "check", "raven"],
                                  ["profiles", "probe", "local"]])
def test_without_slurm_commands(tmp_path: Path, args: list[str]) -> None:
    r = _run(tmp_path, *args, path=str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "Error: sinfo not found" in r.stderr or "Error: sbatch not found" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["a;b", "$(id)", "-x y", "x y", "../up"])
def test_hostile_profile_names(tmp_path: Path, name: str) -> None:
    r = _run(tmp_path, "profiles", "discover", "--", name)
    assert r.returncode == 1 and "must be letters, digits" in r.stderr, r.stderr


def test_output_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("precious\n")
    r = _run(tmp_path, "profiles", "discover", "-o", str(out))
    assert r.returncode == 1 and "pass --force" in r.stderr
    assert out.read_text() == "precious\n"


def test_probe_unknown_profile(tmp_path: Path) -> None:
    r = _run(tmp_path, "profiles", "probe", "nosuch")
    assert r.returncode == 1 and "unknown profile 'nosuch'" in r.stderr


def test_help_lists_the_commands(tmp_path: Path) -> None:
    r = _run(tmp_path, "profiles", "--help")
    for cmd in ("discover", "check", "probe"):
        assert cmd in r.stdout


def test_probe_takes_a_name(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: local\n")
    r = _run(tmp_path, "profiles", "probe", str(mine))
    assert r.returncode == 1 and "probe takes a profile name" in r.stderr, r.stderr

"""The wheel carries the templates and shipped profiles, and works installed elsewhere."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the freshly built wheel installed in it."""
    tmp = tmp_path_factory.mktemp("wheel")
    # No build isolation: hatchling comes from the dev venv, so no network is needed.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--quiet", "-w", str(tmp / "dist"), str(REPO)], cwd=tmp)
    wheel = next((tmp / "dist").glob("hpctrain-*.whl"))
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    py = venv / "bin" / "python"
    target = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=tmp).strip())
    # The dependencies come from the dev venv's site-packages and the shared one it reads
    # (scripts/setup.sh), appended after the venv's own: a .pth line adds the directory but
    # does not run its .pth files, so the checkout's editable install stays invisible.
    deps = [p for p in sys.path if p.endswith("site-packages")] or site.getsitepackages()
    (target / "_deps.pth").write_text("\n".join(deps) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--quiet",
          str(wheel)], cwd=tmp)
    return venv


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLURM_CONF")}
    return {**env, "HPCTRAIN_HOME": str(tmp / "home")}


def test_wheel_holds_the_data_files(installed: Path) -> None:
    py = installed / "bin" / "python"
    out = _run([str(py), "-c", "import hpctrain, hpctrain.files.resources as r; "
                "print(hpctrain.__file__); print(r.templates_dir()); print(r.profiles_dir())"],
               cwd=installed.parent)
    module, templates, profiles = out.split()
    for path in (module, templates, profiles):
        assert path.startswith(str(installed)), f"{path} is not from the installed wheel"
    assert (Path(templates) / "sbatch.sh.j2").is_file()
    assert (Path(profiles) / "raven.yaml").is_file()


def test_installed_cli_lists_profiles_and_renders(installed: Path) -> None:
    hp = str(installed / "bin" / "hpctrain")
    env = _env(installed.parent)
    listing = _run([hp, "profiles", "list"], cwd=installed.parent, env=env)
    for name in ("raven", "gilbreth", "marvin", "local"):
        assert name in listing
    script = _run([hp, "render", "--profile", "raven", "--nodes", "2", "--dry-run"],
                  cwd=installed.parent, env=env)
    assert script.startswith("#!/bin/bash")
    assert "#SBATCH --nodes=2" in script

"""`sinfo --version` asked once per sinfo binary (slurm/versioncache.py, issue 43), with the
real sinfo copied where the test can replace it as an upgrade would."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hpctrain.slurm import versioncache
from hpctrain.slurm.transport import LocalTransport


def test_the_version_is_asked_once_per_binary_and_again_after_an_upgrade(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which("sinfo")
    if real is None:
        pytest.skip("no sinfo on PATH")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    shutil.copy2(os.path.realpath(real), sinfo)
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # sinfo reads a configuration even for --version (it needs no controller).
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=versions\nSlurmctldHost=localhost\n")
    here = LocalTransport(str(conf))
    said = here.slurm_version_text()
    assert said is not None and said.startswith("slurm"), said
    kept = tmp_path / "home" / "state" / versioncache.FILE
    (key,) = json.loads(kept.read_text())
    assert key.startswith(f"{sinfo}:")
    # Asked no more: what the file says is the answer (changed here to tell them apart).
    kept.write_text(json.dumps({key: "slurm 99.1.0"}))
    assert here.slurm_version_text() == "slurm 99.1.0"
    # An upgrade replaces the binary: asked again, both remembered.
    os.utime(sinfo, ns=(0, sinfo.stat().st_mtime_ns + 10**9))
    assert here.slurm_version_text() == said
    assert len(json.loads(kept.read_text())) == 2
    # A state directory that cannot be made (a file in its place) costs only the question.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "state").write_text("not a directory")
    monkeypatch.setenv("HPCTRAIN_HOME", str(blocked))
    assert here.slurm_version_text() == said

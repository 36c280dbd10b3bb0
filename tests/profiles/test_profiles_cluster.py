"""`profiles discover|check|probe` on the dev cluster emulating each shipped profile.

One module, one cluster start per profile (plus one for a changed copy of raven): discover
gives back the profile's partitions, node types and limits (outside what it marks for review
and the node counts, which the emulation scales down), every golden topology rendered from the
discovered profile is accepted by SLURM, and `check` finds no difference, or each one made.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from hpctrain.files.resources import profiles_dir
from hpctrain.profiles import load_profile, load_profile_file
from hpctrain.profiles.model import Profile
from tests.unit.test_render import EXTRA, TOPOLOGIES

from .helpers import assert_same_profile

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
Switch = Callable[..., "DevClusterHandle"]


def _run(dc: DevClusterHandle, cwd: Path, *args: str,
         **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], env=dc.env(**env),
                          cwd=cwd, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, check=False)


def _topologies(profile: Profile) -> list[list[str]]:
    """The golden topologies (tests/unit/test_render.py) of this profile, as render options."""
    cases = [dict(kw) for kw in TOPOLOGIES.values()]
    cases += [{k: v for k, v in kw.items() if k != "profile"} for kw in EXTRA.values()
              if kw["profile"] == profile.name]
    out = []
    for kw in cases:
        if kw.get("gpus_per_node", 0) is None:
            kw["gpus_per_node"] = profile.default_partition.gpus_per_node
        out.append([a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", str(v))])
    return out


def _discover_and_render(dc: DevClusterHandle, tmp_path: Path, name: str) -> None:
    out = tmp_path / f"{name}-discovered.yaml"
    r = _run(dc, tmp_path, "profiles", "discover", f"{name}-discovered", "-o", str(out),
             "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {x["field"] for x in doc["review"]} >= {"nccl", "environment.modules"}
    assert doc["written"] == str(out) and "REVIEW nccl" in out.read_text()
    got = load_profile_file(out)
    assert_same_profile(load_profile(name), got)
    for options in _topologies(load_profile(name)):
        r = _run(dc, tmp_path, "render", "--profile", str(out), "--account", "hpctrain-dev",
                 *options, "--check")
        assert r.returncode == 0 and "SLURM accepts the script" in r.stderr, (options, r.stderr)


def _check(dc: DevClusterHandle, tmp_path: Path, name: str) -> dict[str, Any]:
    r = _run(dc, tmp_path, "profiles", "check", name, "--json")
    report: dict[str, Any] = json.loads(r.stdout)
    assert r.returncode == (1 if report["fatal"] else 0), r.stderr
    return report


@pytest.mark.parametrize("name", ["local", "raven", "gilbreth", "marvin"])
def test_discover_and_check(devcluster_with: Switch, tmp_path: Path, name: str) -> None:
    dc = devcluster_with(name)
    _discover_and_render(dc, tmp_path, name)
    report = _check(dc, tmp_path, name)
    assert report["differences"] == [] and not report["fatal"]
    assert any("fewer nodes" in n for n in report["notes"])


def _changed_raven(tmp_path: Path) -> Path:
    data = yaml.safe_load((profiles_dir() / "raven.yaml").read_text())
    data["name"] = "raven-changed"
    gpu, gpudev = data["partitions"]
    gpu.update(max_nodes=64, max_time="12:00:00", default_time="11:00:00")
    for t in gpu["node_types"]:
        t["features"] = ["gpu"]  # the gpu-bw feature is gone
    gpudev.update(gpus_per_node=2, allowed_gpus_per_node=[1, 2])
    path = tmp_path / "raven-changed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_check_reports_each_change(devcluster_with: Switch, tmp_path: Path) -> None:
    dc = devcluster_with(str(_changed_raven(tmp_path)))
    report = _check(dc, tmp_path, "raven")
    found = {(d["where"], d["message"], d["fatal"]) for d in report["differences"]}
    assert found >= {
        ("raven gpu", "max_time 24:00:00 in the profile, 12:00:00 on the cluster", True),
        ("raven gpu", "max_nodes 80 in the profile, 64 on the cluster", True),
        ("raven gpu", "default_time 23:59:00 in the profile, 11:00:00 on the cluster", False),
        ("raven gpu gpu-bw", "no nodes with features gpu-bw,gpu", True),
        ("raven gpu", "feature 'gpu-bw' is on no node of the partition", True),
        ("raven gpudev gpudev", "4 GPUs per node in the profile, 2 on the cluster", True),
    }, found
    assert all(d["fix"] for d in report["differences"])
    r = _run(dc, tmp_path, "profiles", "check", "raven")
    assert r.returncode == 1 and "FATAL raven gpu: max_nodes 80" in r.stdout
    assert "Traceback" not in r.stderr


def test_probe_local(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """No GPU or InfiniBand on the dev cluster: the probe says so and writes nothing."""
    home = tmp_path / "home"
    r = _run(devcluster, tmp_path, "profiles", "probe", "local", "--json",
             HPCTRAIN_HOME=str(home))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["written"] is None and doc["settings"] == {}
    assert doc["findings"]["host"] and doc["findings"]["hcas"] == []
    assert not (home / "config" / "profiles").exists()
    r = _run(devcluster, tmp_path, "profiles", "probe", "local", HPCTRAIN_HOME=str(home))
    assert r.returncode == 0 and "nothing to write" in r.stdout, r.stderr
    assert "no GPU seen" in r.stdout


def _conf_copy(dc: DevClusterHandle, tmp_path: Path, key: str, value: str) -> Path:
    text = dc.slurm_conf.read_text()
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(rf"(?m)^{key}=.*$", f"{key}={value}", text))
    return conf


def test_sacctmgr_refused_degrades(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    conf = _conf_copy(devcluster, tmp_path, "AccountingStorageType",
                      "accounting_storage/none")
    r = _run(devcluster, tmp_path, "profiles", "discover", "--json", SLURM_CONF=str(conf))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert any("sacctmgr gave no answer" in n for n in doc["notes"])
    assert "qos" not in doc["profile"] and doc["profile"]["partitions"]
    assert "sacctmgr gave no answer" in r.stderr


def test_controller_down(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    conf = _conf_copy(devcluster, tmp_path, "SlurmctldPort", "9")
    for args in (["profiles", "check", "local"], ["profiles", "discover"]):
        r = _run(devcluster, tmp_path, *args, SLURM_CONF=str(conf))
        assert r.returncode == 1 and "Error:" in r.stderr, r.stderr
        assert "controller is down" in r.stderr and "Traceback" not in r.stderr

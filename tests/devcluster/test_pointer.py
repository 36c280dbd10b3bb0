"""How hpctrain's SLURM client finds the dev cluster: the slurm.conf that `up` publishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.devcluster import DevCluster
from hpctrain.devcluster.state import publish, withdraw
from hpctrain.files import paths
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import resolve_slurm_conf
from hpctrain.slurm.transport import LocalTransport


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home dir; echo x"))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    paths.state_dir().mkdir(parents=True)
    return tmp_path


def test_published_conf_is_found_until_withdrawn(home: Path) -> None:
    conf = home / "it's a cluster" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text("ClusterName=x\n")
    assert resolve_slurm_conf() is None
    publish(paths.slurm_conf_pointer(), conf)
    assert resolve_slurm_conf() == str(conf)
    assert SlurmClient.from_environment().transport == LocalTransport(str(conf))
    withdraw(paths.slurm_conf_pointer(), home / "other" / "slurm.conf")
    assert resolve_slurm_conf() == str(conf), "another cluster's down leaves ours published"
    withdraw(paths.slurm_conf_pointer(), conf)
    assert not paths.slurm_conf_pointer().exists()
    assert resolve_slurm_conf() is None


def test_environment_wins_and_a_vanished_conf_is_ignored(home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    conf = home / "slurm.conf"
    publish(paths.slurm_conf_pointer(), conf)
    assert resolve_slurm_conf() is None
    conf.write_text("ClusterName=x\n")
    monkeypatch.setenv("SLURM_CONF", "/etc/elsewhere/slurm.conf")
    assert resolve_slurm_conf() == "/etc/elsewhere/slurm.conf"


def test_only_the_home_cluster_publishes_by_default(home: Path) -> None:
    assert DevCluster().pointer == paths.slurm_conf_pointer()
    assert DevCluster(paths.devcluster_dir()).pointer == paths.slurm_conf_pointer()
    assert DevCluster(home / "elsewhere").pointer is None
    assert DevCluster(home / "elsewhere", pointer=home / "p").pointer == home / "p"

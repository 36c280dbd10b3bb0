"""What the probe writes into the user's profile (pure findings, a real loader, tmp homes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError, ProfileError
from hpctrain.profiles import load_profile
from hpctrain.profiles.probe import Findings, nccl_settings, parse_findings, write_findings

IB = Findings(
    host="ravg1001",
    net=[{"name": "eno1", "infiniband": False, "state": "up"},
         {"name": "ib0", "infiniband": True, "state": "up"},
         {"name": "ib1", "infiniband": True, "state": "down"}],
    hcas=[{"name": "mlx5_0", "ports": [{"port": "1", "state": "4: ACTIVE", "rate": "200 Gb/sec",
                                        "link_layer": "InfiniBand"}]},
          {"name": "mlx5_1", "ports": [{"port": "1", "state": "1: DOWN", "rate": "10 Gb/sec",
                                        "link_layer": "InfiniBand"}]}],
    nvidia_smi=True, gpus=["NVIDIA A100-SXM4-40GB"] * 4, driver="535.104.05",
)
PLAIN = Findings(host="node1", net=[{"name": "lo", "infiniband": False, "state": "unknown"}],
                 hcas=[], nvidia_smi=False, gpus=[], driver=None)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path))
    return tmp_path / "config" / "profiles"


def test_settings_from_what_is_up() -> None:
    assert nccl_settings(IB) == {"socket_ifname": "ib0", "ib_hca": "mlx5_0"}
    assert nccl_settings(PLAIN) == {}
    assert "4 GPU(s): NVIDIA A100-SXM4-40GB" in IB.summary()
    assert "no GPU seen (no nvidia-smi)" in PLAIN.summary()


def test_new_user_profile_extends_the_shipped_one(home: Path) -> None:
    written = write_findings("raven", True, IB)
    assert written.path == home / "raven.yaml"
    text = written.path.read_text()
    assert text.startswith("# probe: node ravg1001") and "extends: raven" in text
    prof = load_profile("raven")
    assert (prof.nccl.socket_ifname, prof.nccl.ib_hca) == ("ib0", "mlx5_0")
    assert prof.partition("gpudev") is not None  # the shipped partitions come through


def test_users_values_are_kept(home: Path) -> None:
    home.mkdir(parents=True)
    mine = home / "raven.yaml"
    mine.write_text("extends: raven\nnccl:\n  socket_ifname: ib1\n  debug: WARN\n"
                    "output_dir: runs\n")
    written = write_findings("raven", True, IB)
    assert written.kept == {"socket_ifname": "ib1"}
    assert written.settings == {"ib_hca": "mlx5_0"}
    prof = load_profile("raven")
    assert (prof.nccl.socket_ifname, prof.nccl.ib_hca, prof.nccl.debug) == (
        "ib1", "mlx5_0", "WARN")
    assert prof.output_dir == "runs"
    assert (home / "raven.yaml.bak").read_text().startswith("extends: raven")


def test_nothing_found_writes_nothing(home: Path) -> None:
    assert write_findings("raven", True, PLAIN).path is None
    assert not home.exists()


def test_broken_user_file_is_left_alone(home: Path) -> None:
    home.mkdir(parents=True)
    mine = home / "raven.yaml"
    mine.write_text("extends: raven\nnccl: [\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        write_findings("raven", True, IB)
    assert mine.read_text() == "extends: raven\nnccl: [\n"


def test_no_findings_in_output() -> None:
    with pytest.raises(HpctrainError, match="printed no findings"):
        parse_findings("hpctrain: job 5 on 1 node(s)\n")

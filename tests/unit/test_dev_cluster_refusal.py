"""sbatch's refusal on a dev cluster that emulates another profile, or fewer nodes, than the
job's: the fix names the `devcluster up` that makes them agree (newcomer review, friction 5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpctrain.devcluster import DevCluster
from hpctrain.errors import HpctrainError, SlurmError, SlurmUnavailableError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.submission.submit import dev_cluster_refusal

REFUSED = SlurmError("SLURM refused the job: sbatch: error: invalid partition specified: gpudev",
                     "change the request as SLURM's message says")


@dataclass
class _Transport:
    conf: str | None

    def conf_path(self) -> str | None:
        return self.conf


@dataclass
class _Client:
    transport: _Transport


@dataclass
class _Place:
    """What dev_cluster_refusal asks of a place: its SLURM's slurm.conf (a login's: None)."""

    conf: str | None

    def slurm_client(self) -> _Client:
        return _Client(_Transport(self.conf))


@pytest.fixture
def dev_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A dev cluster's slurm.conf and state.json: profile local, 2 nodes of each type."""
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path))
    layout = DevCluster().layout
    layout.slurm_conf.parent.mkdir(parents=True, exist_ok=True)
    layout.slurm_conf.write_text("ClusterName=hpctrain-dev\n")
    layout.state_file.write_text(json.dumps({"profile": "local", "nodes_per_partition": 2}))
    return str(layout.slurm_conf)


def _plan(profile: str, **options: object) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile(profile), command=("python", "x.py"),
                                 preview=True, **options))  # type: ignore[arg-type]


def test_another_profile_than_the_emulated_one_is_named(dev_conf: str) -> None:
    error = dev_cluster_refusal(REFUSED, _plan("raven", partition="gpudev", time="10"),
                                _Place(dev_conf))  # type: ignore[arg-type]
    assert error.what == REFUSED.what
    assert error.fix == ("the dev cluster emulates profile local, not raven: `hpctrain "
                         "devcluster up --profile raven --replace`, or submit with -P local")


def test_more_nodes_than_the_dev_cluster_has_are_named(dev_conf: str) -> None:
    DevCluster().layout.state_file.write_text(
        json.dumps({"profile": "local", "nodes_per_partition": 1}))
    error = dev_cluster_refusal(REFUSED, _plan("local", nodes=2), _Place(dev_conf))  # type: ignore[arg-type]
    assert error.fix is not None and "--nodes 2 --replace`, or submit with --nodes 1" in error.fix


@pytest.mark.parametrize("place", [_Place(None), _Place("/etc/slurm/slurm.conf")])
def test_another_slurm_keeps_slurms_words(dev_conf: str, place: _Place) -> None:
    plan = _plan("raven", partition="gpudev", time="10")
    assert dev_cluster_refusal(REFUSED, plan, place) is REFUSED  # type: ignore[arg-type]


def test_an_unreachable_slurm_or_the_same_profile_keeps_the_error(dev_conf: str) -> None:
    down = SlurmUnavailableError("slurmctld is down", "start it")
    plan = _plan("raven")
    assert dev_cluster_refusal(down, plan, _Place(dev_conf)) is down  # type: ignore[arg-type]
    other = HpctrainError("no", "fix")
    assert dev_cluster_refusal(other, plan, _Place(dev_conf)) is other  # type: ignore[arg-type]
    local = _plan("local")
    assert dev_cluster_refusal(REFUSED, local, _Place(dev_conf)) is REFUSED  # type: ignore[arg-type]

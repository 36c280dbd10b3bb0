"""`render --check` on dev clusters emulating each shipped profile: the validator and SLURM agree.

Every topology hpctrain renders for a profile is accepted by `sbatch --test-only` on a dev
cluster carrying that profile's partitions and limits, and requests the validator refuses are
refused by SLURM too. One module, grouped by profile, so the cluster restarts once per profile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
Switch = Callable[..., "DevClusterHandle"]

ACCOUNT = {"gilbreth": ["--account", "hpctrain-dev"], "marvin": ["--account", "hpctrain-dev"]}

# What users render for each profile: 1 GPU, one full node, two full nodes, and the specials.
TOPOLOGIES: dict[str, list[list[str]]] = {
    "raven": [
        [],
        ["--gpus-per-node", "2"],
        ["--gpus-per-node", "4"],
        ["--nodes", "2"],
        ["--nodes", "2", "--launcher", "torchrun"],
        ["--nodes", "2", "--constraint", "gpu-bw"],
        ["--partition", "gpudev", "--gpus-per-node", "4", "--time", "15"],
    ],
    "gilbreth": [
        [],
        ["--gpus-per-node", "2"],
        ["--nodes", "2"],
        ["--nodes", "4", "--gpus-per-node", "1"],
        ["--partition", "training", "--gpus-per-node", "4"],
        ["--partition", "training", "--nodes", "2", "--time", "24:00:00"],
        ["--partition", "a30", "--gpus-per-node", "3"],
        ["--qos", "standby", "--time", "4:00:00"],
        # Node types: 4 GPUs on a100-40gb take --constraint=N, 64 cores --constraint=K|J.
        ["--partition", "a100-40gb", "--gpus-per-node", "4"],
        ["--gpus-per-node", "2", "--cpus-per-task", "32"],
    ],
    "marvin": [
        [],
        ["--gpus-per-node", "4"],
        ["--nodes", "2"],
        ["--partition", "mlgpu_devel", "--nodes", "2"],
        ["--partition", "sgpu_long", "--time", "7-00:00:00"],
    ],
}
# Nodes per node type; gilbreth's 9 types take 18 slurmds at 2 each.
NODES = {"raven": 2, "gilbreth": 2, "marvin": 2}


def _check(dc: DevClusterHandle, profile: str, options: list[str]) -> None:
    r = dc.cli("render", "--profile", profile, *ACCOUNT.get(profile, []), *options, "--check")
    assert r.returncode == 0, f"{profile} {options}: {r.stderr}"
    assert "SLURM accepts the script" in r.stderr


def _valid_script(tmp_path: Path, profile: str, **kw: Any) -> Path:
    account = "hpctrain-dev" if profile in ACCOUNT else None
    plan = build_plan(JobRequest(profile=load_profile(profile), account=account, **kw))
    path = tmp_path / "job.sh"
    path.write_text(render_script(plan))
    return path


def _both_refuse(
    dc: DevClusterHandle, tmp_path: Path, profile: str, request: dict[str, Any],
    sbatch: list[str], reason: tuple[str, str],
) -> None:
    """The validator refuses `request` and SLURM the same thing as sbatch options, each for
    `reason`: (a regex the validator's message matches, the words of SLURM's refusal)."""
    plan_says, slurm_says = reason
    account = "hpctrain-dev" if profile in ACCOUNT else None
    with pytest.raises(PlanError, match=plan_says):
        build_plan(JobRequest(profile=load_profile(profile), account=account, **request))
    ok, msg = dc.test_only(_valid_script(tmp_path, profile), *sbatch)
    assert not ok, f"SLURM accepted {sbatch}: {msg}"
    assert slurm_says in msg, f"SLURM refused {sbatch} for another reason: {msg}"


# SLURM 22.05's words for each refusal, as `sbatch --test-only` prints them on the dev cluster.
NO_SUCH_NODE = "Requested node configuration is not available"
OVER_TIME = "Requested time limit is invalid (missing or exceeds some limit)"
NO_SUCH_PARTITION = "invalid partition specified: nosuch"


@pytest.mark.parametrize("profile", ["raven", "gilbreth", "marvin"])
def test_validator_and_slurm_agree(
    devcluster_with: Switch, tmp_path: Path, profile: str
) -> None:
    dc = devcluster_with(profile, nodes=NODES[profile])
    for options in TOPOLOGIES[profile]:
        _check(dc, profile, options)

    part = load_profile(profile).default_partition
    over_gpus = part.most_gpus + 1
    gpu_opt = (
        f"--gpus-per-node={over_gpus}"
        if profile == "gilbreth"
        else f"--gres=gpu:{part.gpu_type}:{over_gpus}"
    )
    _both_refuse(dc, tmp_path, profile, {"gpus_per_node": over_gpus}, [gpu_opt],
                 (f"{over_gpus} GPUs on one node is impossible", NO_SUCH_NODE))
    over_time = part.max_seconds // 60 + 60
    _both_refuse(dc, tmp_path, profile, {"time": str(over_time)}, [f"--time={over_time}"],
                 (f"is over the limit of partition {part.name}", OVER_TIME))
    _both_refuse(dc, tmp_path, profile, {"partition": "nosuch"}, ["--partition=nosuch"],
                 ("unknown partition 'nosuch'", NO_SUCH_PARTITION))
    over_mem = max(t.mem_mb for t in part.types()) + 1000
    _both_refuse(dc, tmp_path, profile, {"mem": str(over_mem)}, [f"--mem={over_mem}"],
                 (f"--mem {over_mem} MB is more than a {part.name} node has", NO_SUCH_NODE))


def test_raven_gpudev_is_one_node(devcluster_with: Switch, tmp_path: Path) -> None:
    dc = devcluster_with("raven", nodes=NODES["raven"])
    _both_refuse(
        dc, tmp_path, "raven", {"partition": "gpudev", "nodes": 2},
        ["--partition=gpudev", "--nodes=2", "--time=10"],
        ("partition gpudev allows at most 1 node", "Node count specification invalid"),
    )


def test_gilbreth_training_needs_its_qos(devcluster_with: Switch, tmp_path: Path) -> None:
    dc = devcluster_with("gilbreth", nodes=NODES["gilbreth"])
    _both_refuse(
        dc, tmp_path, "gilbreth", {"partition": "training", "qos": "standby"},
        ["--partition=training", "--qos=standby", "--gpus-per-node=1"],
        (r"partition training requires --qos training \(not standby\)",
         "Invalid qos specification"),
    )


def test_check_reports_refusal(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    # A node the profile cannot know of (an sbatch option passed through): only SLURM knows.
    r = devcluster.cli("render", "--profile", "local", "--sbatch-arg=--nodelist=node9",
                       "--check")
    assert r.returncode == 1
    assert "SLURM refuses the script:" in r.stderr and "Invalid node name specified" \
        in r.stderr, r.stderr

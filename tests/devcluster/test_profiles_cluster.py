"""The emulated raven/gilbreth/marvin clusters carry the profile's limits, and SLURM enforces them.

One module, grouped by profile, so the cluster is restarted only once per profile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hpctrain.profiles import load_profile
from hpctrain.values.units import parse_time_seconds

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
Switch = Callable[..., "DevClusterHandle"]


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\nsrun hostname\n")
    return path


def _sinfo(dc: DevClusterHandle) -> dict[str, list[dict[str, str]]]:
    """sinfo's rows by partition: one row per distinct node type in it."""
    keys = ["partition", "time", "cpus", "mem", "gres", "features", "nodes"]
    out = dc.client().run(["sinfo", "-h", "-o", "%P|%l|%c|%m|%G|%f|%N"]).stdout
    rows: dict[str, list[dict[str, str]]] = {}
    for line in out.splitlines():
        row = dict(zip(keys, line.split("|"), strict=True))
        rows.setdefault(row["partition"], []).append(row)
    return rows


def _check_partitions(dc: DevClusterHandle, name: str) -> None:
    prof = load_profile(name)
    rows = _sinfo(dc)
    default = prof.default_partition.name
    assert set(rows) == {p.name + ("*" if p.name == default else "") for p in prof.partitions}
    for p in prof.partitions:
        found = rows[p.name + ("*" if p.name == default else "")]
        assert {parse_time_seconds(r["time"]) for r in found} == {p.max_seconds}, p.name
        shapes = {(r["cpus"], r["mem"], r["gres"], r["features"]) for r in found}
        assert shapes == {
            (str(t.cpus), str(t.mem_mb), f"gpu:{p.gpu_type_of(t)}:{t.gpus}",
             ",".join(t.features) or "(null)")
            for t in p.types()
        }, p.name


def _accepts(dc: DevClusterHandle, script: Path, *options: str) -> None:
    ok, msg = dc.test_only(script, *options)
    assert ok, f"refused {options}: {msg}"


def _refuses(dc: DevClusterHandle, script: Path, why: str, *options: str) -> None:
    ok, msg = dc.test_only(script, *options)
    assert not ok, f"accepted {options}: {msg}"
    assert why in msg, msg


RAVEN_FULL = ["--gres=gpu:a100:4", "--constraint=gpu", "--ntasks-per-node=4",
              "--cpus-per-task=18", "--mem=500000", "--nodes=2", "--time=23:59:00"]


class TestRaven:
    @pytest.fixture
    def raven(self, devcluster_with: Switch) -> DevClusterHandle:
        return devcluster_with("raven")

    def test_partitions_match_the_profile(self, raven: DevClusterHandle) -> None:
        assert raven.node_names == ["gpu1", "gpu2", "gpu-bw1", "gpu-bw2"]
        _check_partitions(raven, "raven")

    def test_limits_are_enforced_at_submission(self, raven: DevClusterHandle,
                                               tmp_path: Path) -> None:
        s = _script(tmp_path)
        _accepts(raven, s, *RAVEN_FULL)
        _accepts(raven, s, *[o.replace("=gpu", "=gpu-bw") if o.startswith("--constraint")
                             else o for o in RAVEN_FULL])
        _accepts(raven, s, "--partition=gpudev", "--gres=gpu:a100:1", "--time=00:15:00")
        _refuses(raven, s, "configuration is not available",
                 *[o.replace("a100:4", "a100:8") for o in RAVEN_FULL])
        _refuses(raven, s, "time limit", *[o.replace("23:59:00", "48:00:00")
                                           for o in RAVEN_FULL])
        _refuses(raven, s, "Invalid partition", *RAVEN_FULL, "--partition=nosuch")
        _refuses(raven, s, "configuration is not available",
                 *[o.replace("500000", "500001") for o in RAVEN_FULL])
        _refuses(raven, s, "Invalid feature", "--constraint=nosuch", "--gres=gpu:a100:1")
        _refuses(raven, s, "time limit", "--partition=gpudev", "--time=00:20:00")
        _refuses(raven, s, "Node count", "--partition=gpudev", "--nodes=2", "--time=00:10:00")

    def test_a_full_node_job_runs(self, raven: DevClusterHandle, tmp_path: Path) -> None:
        script = tmp_path / "full.sh"
        script.write_text("#!/bin/bash\n#SBATCH --output=full-%j.out\n"
                          "srun bash -c 'echo rank=$SLURM_PROCID'\n")
        job = raven.sbatch(script, *RAVEN_FULL)
        row = raven.wait_job(job)
        assert row["State"] == "COMPLETED", row
        assert "gres/gpu=8" in row["AllocTRES"] and "cpu=144" in row["AllocTRES"]
        out = (tmp_path / f"full-{job}.out").read_text()
        assert sorted(out.split()) == sorted(f"rank={i}" for i in range(8))


class TestGilbreth:
    @pytest.fixture
    def gilbreth(self, devcluster_with: Switch) -> DevClusterHandle:
        return devcluster_with("gilbreth")

    def test_partitions_match_the_profile(self, gilbreth: DevClusterHandle) -> None:
        _check_partitions(gilbreth, "gilbreth")
        part = gilbreth.client().run(["scontrol", "-o", "show", "partition", "training"]).stdout
        assert "AllowQos=training" in part

    def test_training_needs_its_qos_and_accounts_are_checked(
        self, gilbreth: DevClusterHandle, tmp_path: Path
    ) -> None:
        s = _script(tmp_path)
        acct = "--account=hpctrain-dev"
        _refuses(gilbreth, s, "Invalid qos", acct, "-p", "training", "--gpus-per-node=4")
        _accepts(gilbreth, s, acct, "-p", "training", "-q", "training", "--gpus-per-node=4")
        _refuses(gilbreth, s, "time limit", acct, "-p", "training", "-q", "training",
                 "--gpus-per-node=4", "--time=25:00:00")
        _refuses(gilbreth, s, "QOS", acct, "-p", "a30", "-q", "standby", "--gpus-per-node=1",
                 "--time=05:00:00")
        _accepts(gilbreth, s, acct, "-p", "a30", "-q", "standby", "--gpus-per-node=1",
                 "--time=03:00:00")
        _refuses(gilbreth, s, "Invalid account", "--account=nosuch", "-p", "a30",
                 "--gpus-per-node=1")
        _accepts(gilbreth, s, acct, "-p", "a100-40gb", "--constraint=nvlink",
                 "--gpus-per-node=4")
        _refuses(gilbreth, s, "configuration is not available", acct, "-p", "a30",
                 "--constraint=nvlink", "--gpus-per-node=1")
        _refuses(gilbreth, s, "configuration is not available", acct, "-p", "a30",
                 "--gpus-per-node=4")


class TestMarvin:
    @pytest.fixture
    def marvin(self, devcluster_with: Switch) -> DevClusterHandle:
        return devcluster_with("marvin")

    def test_partitions_share_nodes_by_shape(self, marvin: DevClusterHandle) -> None:
        _check_partitions(marvin, "marvin")
        assert marvin.node_names == ["sgpu1", "sgpu2", "mlgpu1", "mlgpu2"]
        nodes = {p: r[0]["nodes"] for p, r in _sinfo(marvin).items()}
        assert {n for p, n in nodes.items() if p.startswith("sgpu")} == {"sgpu[1-2]"}
        assert {n for p, n in nodes.items() if p.startswith("mlgpu")} == {"mlgpu[1-2]"}

    def test_limits_are_enforced_at_submission(self, marvin: DevClusterHandle,
                                               tmp_path: Path) -> None:
        s = _script(tmp_path)
        acct = "--account=ag_hpctrain_test"
        _accepts(marvin, s, acct, "-p", "sgpu_short", "--gres=gpu:a100:4", "--nodes=2",
                 "--ntasks-per-node=4", "--cpus-per-task=32", "--threads-per-core=1",
                 "--exclusive", "--mem=1000000", "--time=08:00:00")
        _accepts(marvin, s, acct, "-p", "mlgpu_medium", "--gres=gpu:a40:8",
                 "--ntasks-per-node=8", "--cpus-per-task=16", "--mem=500000",
                 "--time=1-00:00:00")
        _refuses(marvin, s, "configuration is not available", "-p", "sgpu_short",
                 "--gres=gpu:a40:1")
        _refuses(marvin, s, "time limit", "-p", "sgpu_devel", "--gres=gpu:a100:1",
                 "--time=02:00:00")
        _refuses(marvin, s, "Invalid partition", "-p", "sgpu", "--gres=gpu:a100:1")

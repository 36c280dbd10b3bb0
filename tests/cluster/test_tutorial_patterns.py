"""Each tutorial's launch pattern as a real job on the dev cluster (2 emulated GPUs per node),
on 1 node and on 2: the CPU programs in examples/tutorials/ under the launcher that
docs/tutorials.md gives them. Every rank all-reduces (a wrong world size hangs or fails), then
writes `rank R of N ...` into $HPCTRAIN_RUN_DIR/ranks/rank-R.txt; ranks 0..N-1 must each have
written exactly one line. A rank started twice (two workers per GPU) appends a second line.
Each rank also says how many threads torch gave it: the batch script's default, the CPUs each
training process holds, whatever the launcher (the jobs are submitted without the test
session's OMP_NUM_THREADS).

The `pasted-*` cases submit a tutorial's launch line as it shows it (`srun python ...`,
`srun torchrun --nproc_per_node=...`) with no --launcher: the world size the ranks report must
be the job's, not a launcher started once per GPU.

All jobs are queued at once, so SLURM runs them back to back; each test waits for its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tutorials"
GPUS_PER_NODE = 2  # what the local profile's emulated nodes have
# Its 4 CPUs per node shared by the node's 2 training processes, but no more than this machine,
# where every emulated node runs, shows each of them (1 on a 2-core machine).
THREADS = max(1, min(2, len(os.sched_getaffinity(0)) // GPUS_PER_NODE))
# The jobs wait in one queue: the last waits for all before it (each well under a minute).
WAIT_S = 900

# name -> (launcher, program and its arguments, node counts)
PATTERNS: dict[str, tuple[str, tuple[str, ...], tuple[int, ...]]] = {
    # Marvin (004): one process per node, mp.spawn over the node's GPUs.
    "spawn": ("per-node", ("spawn_per_node.py",), (1, 2)),
    # The multi-node tutorial's `srun python src/train.py` (002), as a program written for
    # torchrun's environment: srun sets RANK, LOCAL_RANK, WORLD_SIZE per task.
    "env-srun": ("srun", ("torchrun_env.py",), (1, 2)),
    # The torchrun tutorial (003): the same worker, started by torchrun once per node.
    "env-torchrun": ("torchrun", ("torchrun_env.py",), (1, 2)),
    # Raven (000): Lightning reads SLURM's variables, one task per GPU.
    "lightning-srun": ("srun", ("lightning_ddp.py",), (1, 2)),
    # Gilbreth's single-node job (001): Lightning's own launcher starts the workers. Two nodes
    # go beyond the tutorial: NODE_RANK tells each node's launcher its ranks.
    "lightning-per-node": ("per-node", ("lightning_ddp.py",), (1, 2)),
    # A program that runs torchrun itself (a repository's own launcher script): per-node
    # gives it NNODES, NODE_RANK, LOCAL_WORLD_SIZE and the master for torchrun's options.
    "per-node-torchrun": ("per-node", ("own_torchrun.py",), (1, 2)),
}
# Each tutorial's own launch line pasted after `--` as it shows it, with no --launcher (and
# for torchrun no --gpus-per-node): hpctrain reads the launcher in front of the command
# (plan/launch_lines.py). name -> (hpctrain options, the line, the launcher it becomes, node
# counts); {program} is the pattern's program. 004's and 001's lines are a bare `python ...`:
# PATTERNS above.
PASTED: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, tuple[int, ...]]] = {
    # Raven (000/002): `srun python src/train.py`.
    "pasted-srun-lightning": (("--gpus-per-node", str(GPUS_PER_NODE)),
                              ("srun", "python", "{lightning_ddp.py}"), "srun", (1, 2)),
    "pasted-srun-env": (("--gpus-per-node", str(GPUS_PER_NODE)),
                        ("srun", "python", "{torchrun_env.py}"), "srun", (1, 2)),
    # 003's run_distributed.slurm line, its variables unexpanded (as the script has them) ...
    "pasted-srun-torchrun": ((), (
        "srun", "torchrun", "--nnodes=$SLURM_JOB_NUM_NODES", f"--nproc_per_node={GPUS_PER_NODE}",
        "--rdzv_backend=c10d", "--rdzv_endpoint=$MASTER_ADDR:29500", "{torchrun_env.py}"),
        "torchrun", (1, 2)),
    # ... and as a login shell pastes it, where they are empty.
    "pasted-torchrun-expanded": ((), (
        "srun", "torchrun", "--nnodes=", f"--nproc_per_node={GPUS_PER_NODE}",
        "--rdzv_backend=c10d", "--rdzv_endpoint=:29500", "{torchrun_env.py}"), "torchrun",
        (1, 2)),
    "pasted-python-m-run": ((), (
        "python", "-m", "torch.distributed.run", "--nproc-per-node", str(GPUS_PER_NODE),
        "--standalone", "{torchrun_env.py}"), "torchrun", (1,)),
}
CASES = [*((name, nodes) for name, (_, _, counts) in PATTERNS.items() for nodes in counts),
         *((name, nodes) for name, (*_, counts) in PASTED.items() for nodes in counts)]


def _job_args(name: str) -> list[str]:
    """hpctrain's options and the job's command for a case."""
    if name in PASTED:
        options, line, _, _ = PASTED[name]
        return [*options, "--", *(str(EXAMPLES / w[1:-1]) if w.startswith("{") else w
                                  for w in line)]
    launcher, (program, *args), _ = PATTERNS[name]
    return ["--gpus-per-node", str(GPUS_PER_NODE), "--launcher", launcher,
            "--", "python", str(EXAMPLES / program), *args]


def _submit(dc: DevClusterHandle, cwd: Path, name: str, nodes: int) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "hpctrain", "submit", "--json", "--profile", "local",
         "--nodes", str(nodes), "--time", "5", "--job-name", f"tut-{name}-{nodes}n",
         *_job_args(name)],
        cwd=cwd, env=dc.env_default_threads(), capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert r.returncode == 0, f"{name} on {nodes} node(s): {r.stderr}"
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def _case_id(name: str, nodes: int) -> str:
    return f"{name}-{nodes}node"


@pytest.fixture(scope="module")
def queued(request: pytest.FixtureRequest, devcluster_with: Callable[..., DevClusterHandle],
           tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[DevClusterHandle, dict[tuple[str, int], dict[str, Any]]]:
    """Every selected case submitted once, to the dev cluster with the local profile, 2 nodes.

    Only the cases this session runs (`-k` or node ids may select a few: the SLURM 24.11 lane
    of scripts/test.sh does) queue a job.
    """
    # An earlier module may have switched the cluster to another profile; queue nothing there.
    dc = devcluster_with("local")
    cwd = tmp_path_factory.mktemp("tutorials")
    ids = {item.nodeid for item in request.session.items}
    cases = [(name, nodes) for name, nodes in CASES
             if any(i.endswith(f"[{_case_id(name, nodes)}]") for i in ids)]
    return dc, {(name, nodes): _submit(dc, cwd, name, nodes) for name, nodes in cases}


def _rank_lines(ranks_dir: Path) -> dict[str, list[str]]:
    if not ranks_dir.is_dir():
        return {}
    return {p.name: p.read_text().splitlines() for p in sorted(ranks_dir.iterdir())}


@pytest.mark.parametrize(("name", "nodes"), CASES, ids=[_case_id(n, k) for n, k in CASES])
def test_every_rank_runs_exactly_once(
    queued: tuple[DevClusterHandle, dict[tuple[str, int], dict[str, Any]]], name: str,
    nodes: int
) -> None:
    dc, jobs = queued
    job = jobs[(name, nodes)]
    row = dc.wait_job(str(job["job_id"]), timeout_s=WAIT_S)
    logs = Path(str(job["stdout"])).read_text() + Path(str(job["stderr"])).read_text()
    assert row["State"] == "COMPLETED", f"{row}\n{logs[-4000:]}"
    world = nodes * GPUS_PER_NODE
    if name in PASTED:
        # The pasted launcher was read into hpctrain's, not started inside it.
        plan = job["plan"]
        assert (plan["launcher"], plan["gpus_per_node"]) == (PASTED[name][2], GPUS_PER_NODE), plan
    found = _rank_lines(Path(str(job["run_dir"])) / "ranks")
    assert sorted(found) == sorted(f"rank-{r}.txt" for r in range(world)), (found, logs[-4000:])
    for rank in range(world):
        lines = found[f"rank-{rank}.txt"]
        assert len(lines) == 1, f"rank {rank} ran {len(lines)} times: {lines}"
        words = lines[0].split()
        # "rank R of N host H threads T local L"; ranks fill each node in turn, GPUs in local
        # order.
        assert words[:4] == ["rank", str(rank), "of", str(world)], lines[0]
        assert words[-4:] == ["threads", str(THREADS), "local", str(rank % GPUS_PER_NODE)], \
            lines[0]

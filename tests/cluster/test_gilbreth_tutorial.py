"""The Gilbreth tutorial's two jobs, and the docs' K/I/J and G/N node types, on a dev cluster
emulating gilbreth: hpctrain renders them, adds the constraint that keeps each job on nodes
that can run it, and SLURM (`sbatch --test-only`) accepts them and names those nodes.

One test, so the cluster is started once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
Switch = Callable[..., "DevClusterHandle"]

# Request -> the constraint hpctrain must add, and the node types SLURM may place it on
# (the emulated nodes are named after their type: k1, k2, i1, ...).
CASES: list[tuple[list[str], str | None, set[str]]] = [
    # The tutorial: `-p a100-80gb --nodes=1 --gpus-per-node=4`; only the J nodes have 4.
    (["--partition", "a100-80gb", "--nodes", "1", "--gpus-per-node", "4"], "J", {"j"}),
    # The tutorial: 4 nodes x 1 GPU; every a100-80gb type can take it.
    (["--partition", "a100-80gb", "--nodes", "4", "--gpus-per-node", "1"], None, {"k", "i", "j"}),
    # ... with the tutorial's 64 CPUs per task: the 32-core I nodes drop out.
    (["--nodes", "4", "--gpus-per-node", "1", "--cpus-per-task", "64"], "K|J", {"k", "j"}),
    # The docs' shapes: 2 GPUs with 64 cores lands on K (or J); 32 cores fit I too.
    (["--gpus-per-node", "2", "--cpus-per-task", "32"], "K|J", {"k", "j"}),
    (["--gpus-per-node", "2", "--cpus-per-task", "16", "--constraint", "I"], "I", {"i"}),
    # 4 GPUs on a100-40gb: only the NVLink N nodes.
    (["--partition", "a100-40gb", "--gpus-per-node", "4"], "N", {"n"}),
    (["--partition", "a30", "--gpus-per-node", "3", "--cpus-per-task", "8"], "B", {"b"}),
]


def _render(dc: DevClusterHandle, options: list[str]) -> dict[str, object]:
    r = dc.cli("render", "--profile", "gilbreth", "--account", "hpctrain-dev", *options,
               "--check", "--json")
    assert r.returncode == 0, f"{options}: {r.stderr}"
    (data,) = json.loads(r.stdout)["alternatives"]
    assert isinstance(data, dict)
    return data


def _node_prefixes(message: str) -> set[str]:
    # --test-only: "Job 12 to start at ... using 64 processors on nodes k1 in partition ..."
    found = re.search(r"on nodes (\S+)", message)
    assert found, message
    hosts = re.sub(r"\[[^\]]*\]", "1", found.group(1)).split(",")
    return {h.rstrip("0123456789") for h in hosts}


def test_tutorial_jobs_and_node_types_are_accepted(devcluster_with: Switch) -> None:
    dc = devcluster_with("gilbreth")
    for options, constraint, types in CASES:
        data = _render(dc, options)
        plan, check, script = data["plan"], data["check"], data["script"]
        assert isinstance(plan, dict) and isinstance(check, dict) and isinstance(script, str)
        assert plan["constraint"] == constraint, options
        if constraint:
            # `|` is quoted on the #SBATCH line; sbatch reads the quotes itself.
            value = f'"{constraint}"' if "|" in constraint else constraint
            assert f"#SBATCH --constraint={value}\n" in script
        else:
            assert "--constraint" not in script
        assert check["accepted"], f"{options}: {check['message']}"
        assert _node_prefixes(str(check["message"])) <= types, (options, check["message"])


def test_refusals_name_the_types(devcluster_with: Switch) -> None:
    dc = devcluster_with("gilbreth")
    r = dc.cli("render", "--profile", "gilbreth", "--account", "hpctrain-dev",
               "--gpus-per-node", "4", "--constraint", "K")
    assert r.returncode == 1
    assert "K: 2 GPUs, 64 CPUs, 512000 MB, 52 nodes" in r.stderr
    assert "Traceback" not in r.stderr

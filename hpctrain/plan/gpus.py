"""sbatch's `--gpus N` (GPUs for the whole job) as hpctrain's nodes x GPUs per node."""

from __future__ import annotations

from hpctrain.errors import HpctrainError


def map_total_gpus(
    total: int, per_node: int, partition: str,
    nodes: int | None = None, gpus_per_node: int | None = None,
) -> tuple[int, int]:
    """(nodes, GPUs per node) for `total` GPUs: one node if they fit, else full nodes.

    `per_node` is the most GPUs a node of the partition has; a --nodes or --gpus-per-node
    given beside --gpus fixes that side, and the other follows from the total.
    """
    if total < 1:
        raise HpctrainError(f"--gpus {total}: a job needs at least one GPU",
                        "give --gpus 1 or more, or --gpus-per-node 0 for a CPU job")
    if gpus_per_node is not None:
        return _split(total, total // gpus_per_node if gpus_per_node else 0, gpus_per_node,
                      per_node, partition)
    if nodes is not None:
        return _split(total, nodes, total // nodes, per_node, partition)
    if total <= per_node:
        return 1, total
    return _split(total, total // per_node, per_node, per_node, partition)


def _split(total: int, nodes: int, each: int, per_node: int, partition: str) -> tuple[int, int]:
    if nodes >= 1 and 1 <= each <= per_node and nodes * each == total:
        return nodes, each
    raise HpctrainError(
        f"--gpus {total} cannot be split into equal nodes of partition {partition} "
        f"(at most {per_node} GPUs each) as given",
        f"give the layout itself: {equivalent(total, per_node)}",
    )


def equivalent(total: int, per_node: int) -> str:
    """The fewest nodes with equal GPUs that give exactly `total`, as hpctrain options."""
    each = max(d for d in range(1, min(total, per_node) + 1) if total % d == 0) if per_node else 0
    if not each:
        return "--gpus-per-node 0 (this partition has no GPUs)"
    return f"--nodes {total // each} --gpus-per-node {each}"

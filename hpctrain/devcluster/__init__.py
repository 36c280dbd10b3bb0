"""The local dev cluster: a real SLURM (with accounting) on this machine that emulates a profile."""

from hpctrain.devcluster.cluster import DevCluster, Status, UpResult, find_programs
from hpctrain.devcluster.config import CLUSTER_NAME, DEFAULT_NODES, Layout, Ports, plan_cluster

__all__ = [
    "CLUSTER_NAME",
    "DEFAULT_NODES",
    "DevCluster",
    "Layout",
    "Ports",
    "Status",
    "UpResult",
    "find_programs",
    "plan_cluster",
]

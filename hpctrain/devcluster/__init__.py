"""The local dev cluster: a real SLURM (with accounting) on this machine that emulates a profile.

layout: its files and ports; topology: profile -> nodes, partitions, QOS, accounts;
conffiles: slurm.conf and friends from templates/devcluster; hosts: the /etc/hosts line;
accounting: sacctmgr state and sync; daemons/processes: running the daemons; starting: starting
those not running; nodes: waiting for idle nodes; state: state.json and reports; cluster:
DevCluster, which puts them together.
"""

from hpctrain.devcluster.cluster import DevCluster
from hpctrain.devcluster.daemons import find_programs
from hpctrain.devcluster.layout import Layout, Ports
from hpctrain.devcluster.state import Status, UpResult
from hpctrain.devcluster.topology import CLUSTER_NAME, DEFAULT_NODES, plan_cluster

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

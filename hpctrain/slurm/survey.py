"""The cluster's inventory, asked (`hpctrain profiles discover|check`): partitions, nodes,
slurmctld's configuration, and through sacctmgr the QOS and your associations.

Reached through `SlurmClient` (slurm/client.py); slurm/inventory.py reads the answers (pure).
"""

from __future__ import annotations

from collections.abc import Sequence

from hpctrain.errors import SlurmError
from hpctrain.slurm import inventory
from hpctrain.slurm.runner import SlurmRunner
from hpctrain.slurm.versions import NODES_TEXT_ARGV, Dialect


def partition_limits(client: SlurmRunner) -> list[inventory.PartitionInfo]:
    """Every partition with its limits (`scontrol --oneliner show partition`)."""
    result = client.run(["scontrol", "--oneliner", "show", "partition"])
    return inventory.parse_partitions_text(result.stdout)


def node_inventory(client: SlurmRunner, dialect: Dialect | None = None
                   ) -> list[inventory.NodeInfo]:
    """Every node's shape, in JSON where this SLURM has it (versions.Dialect.nodes_argv)."""
    argv = (dialect or client.dialect()).nodes_argv()
    if argv != NODES_TEXT_ARGV:
        result = client.run(argv, check=False)
        # A site without SLURM's JSON plugins refuses --json: the text path still works.
        nodes = inventory.parse_nodes_json(result.stdout) if result.returncode == 0 else None
        if nodes is not None:
            return nodes
    return inventory.parse_nodes_text(client.run(NODES_TEXT_ARGV).stdout)


def config(client: SlurmRunner) -> dict[str, str]:
    """slurmctld's running configuration (`scontrol show config`)."""
    return inventory.parse_config(client.run(["scontrol", "show", "config"]).stdout)


def qos_limits(client: SlurmRunner) -> list[inventory.QosInfo]:
    """Every QOS with its limits; SlurmError where sacctmgr is refused or absent."""
    return inventory.parse_qos(
        sacctmgr(client, ["-P", "-n", "show", "qos", f"format={inventory.QOS_FORMAT}"]))


def associations(client: SlurmRunner, user: str) -> list[inventory.Association]:
    """The accounts (and QOS) `user` may use; SlurmError where sacctmgr is refused."""
    return inventory.parse_associations(sacctmgr(
        client, ["-P", "-n", "show", "assoc", f"user={user}",
                 f"format={inventory.ASSOC_FORMAT}"]))


def sacctmgr(client: SlurmRunner, args: Sequence[str]) -> str:
    """`sacctmgr ARGS`; return its output, or raise SlurmError with the whole command."""
    argv = ["sacctmgr", *args]
    result = client.run(argv, check=False)
    # sacctmgr -i add exits 1 with "Nothing new added" when everything exists already.
    if result.returncode != 0 and "nothing new added" not in (
            result.stdout + result.stderr).lower():
        raise SlurmError(
            f"{' '.join(argv)} failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout

"""What `devcluster up` says it did: already running, repaired, switched or restarted, up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpctrain.cli.devcluster import up_verb
from hpctrain.devcluster.state import UpResult

DAEMONS = {"munged": 1, "mysqld": 2, "slurmdbd": 3, "slurmctld": 4, "slurmd:node1": 5}


def _result(**changes: Any) -> UpResult:
    values: dict[str, Any] = {
        "already_running": False, "profile": "raven", "nodes_per_partition": 2,
        "node_names": ["gpu1", "gpu2"], "slurm_conf": Path("/x/slurm.conf"), "seconds": 3.34,
        "pids": DAEMONS, "started": ["slurmctld", "slurmd:node1"]}
    return UpResult(**{**values, **changes})


@pytest.mark.parametrize(("changes", "said"), [
    ({"already_running": True, "started": []}, "already running"),
    ({}, "repaired in 3.3 s (started slurmctld, slurmd:node1)"),
    ({"started": list(DAEMONS)}, "up in 3.3 s"),
    # --replace keeps munged, MariaDB and slurmdbd: the started daemons alone read as a repair.
    ({"replaced": {"profile": "local", "nodes_per_partition": 2}},
     "switched from profile local to raven in 3.3 s"),
    ({"replaced": {"profile": "raven", "nodes_per_partition": 1}},
     "restarted with 2 node(s) per partition (was 1) in 3.3 s"),
    ({"replaced": {"profile": "raven", "nodes_per_partition": 2}},
     "restarted with its new configuration in 3.3 s"),
])
def test_up_says_what_it_did(changes: dict[str, Any], said: str) -> None:
    assert up_verb(_result(**changes)) == said


def test_a_switch_is_no_repair_in_json() -> None:
    data = _result(replaced={"profile": "local", "nodes_per_partition": 2}).as_dict()
    assert data["replaced"] == {"profile": "local", "nodes_per_partition": 2}

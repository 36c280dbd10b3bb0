"""A 2-node job whose rendezvous port (20000 + job id % 12000) a program on its first node holds
completes: the batch script takes the next port it can bind there (issue 54).

Seen before: a second dev cluster's slurmd daemons sat on 20001 and 20002, and every 2-node job
numbered 1 or 2 of the first cluster failed at once with EADDRINUSE.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.options.helpers import User

pytestmark = [pytest.mark.cluster]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_script" / "train.py"


def test_a_2_node_job_whose_port_is_held_on_its_first_node_completes(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    user = User(devcluster, tmp_path)
    # The job waits for a short one, so that its id, and so its port, is known before it runs.
    first = user.json("submit", "--profile", "local", "--json", "--", "sleep", "4")
    job = user.json("submit", "--profile", "local", "--nodes", "2", "--gpus-per-node", "1",
                    "--after", str(first["job_id"]), "--json", "--",
                    "python", str(EXAMPLE), "--epochs", "2")
    port = 20000 + int(job["job_id"]) % 12000
    with socket.socket() as held:
        try:
            held.bind(("", port))
        except OSError:
            pytest.skip(f"port {port} is taken on this machine already")
        held.listen()
        row = devcluster.wait_job(str(job["job_id"]), timeout_s=120)
    log = Path(job["stdout"]).read_text()
    assert row["State"] == "COMPLETED", log
    assert "epoch 1:" in log

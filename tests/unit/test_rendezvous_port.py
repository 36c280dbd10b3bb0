"""The rendezvous port: the job id's, or the next one the first node can bind (issue 54).

The rendered script runs under bash with `srun` and `scontrol` standing in (as in
test_hostile.py); the port is really held by a listening socket on this machine, which the
batch script, on the first node, must step over. The dev cluster's test of the same is
tests/cluster/test_rendezvous_port_cluster.py.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _job_port(tmp_path: Path, job_id: int, node: str | None) -> int:
    """MASTER_PORT as the job's srun saw it, the batch script run on `node`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    _stub(bin_dir / "srun", f'exec python3 -c "import json,os; json.dump(dict(os.environ), '
                            f"open('{record}', 'w'))\"\n")
    _stub(bin_dir / "scontrol", 'printf "node1\\nnode2\\n"\n')
    plan = build_plan(JobRequest(profile=load_profile("local"), nodes=2,
                                 log_dir=str(tmp_path / "runs"), command=("true",)))
    script = tmp_path / "job.sh"
    script.write_text(render_script(plan))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": str(job_id),
           "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_CPUS_PER_TASK": "2",
           "HOME": str(tmp_path), **({"SLURMD_NODENAME": node} if node else {})}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(json.loads(record.read_text())["MASTER_PORT"])


def _held(port: int) -> socket.socket:
    s = socket.socket()
    try:
        s.bind(("", port))
    except OSError:
        s.close()
        pytest.skip(f"port {port} is taken on this machine already")
    s.listen()
    return s


def test_a_free_port_is_the_job_ids(tmp_path: Path) -> None:
    assert _job_port(tmp_path, 31042, "node1") == 20000 + 31042 % 12000


def test_a_port_held_on_the_first_node_is_stepped_over(tmp_path: Path) -> None:
    with _held(20000 + 31043 % 12000):
        port = _job_port(tmp_path, 31043, "node1")
    assert port != 20000 + 31043 % 12000 and 20000 <= port < 32000
    with socket.socket() as s:  # the port it took was one it could bind
        s.bind(("", port))


def test_the_port_wraps_below_the_ephemeral_range(tmp_path: Path) -> None:
    with _held(31999):
        port = _job_port(tmp_path, 11999, "node1")
    assert 20000 <= port < 31999  # past 31999 it goes on at 20000, never into 32768-


def test_a_batch_script_not_on_the_first_node_keeps_the_job_ids(tmp_path: Path) -> None:
    # It cannot see the first node's ports; every rank derives the same one.
    with _held(20000 + 31044 % 12000):
        assert _job_port(tmp_path, 31044, "node2") == 20000 + 31044 % 12000

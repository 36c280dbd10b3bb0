"""hpctrain as a user runs it against the dev cluster, with a history and directory of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle


class User:
    """`python -m hpctrain` with the cluster's SLURM_CONF, its own HPCTRAIN_HOME and cwd."""

    def __init__(self, cluster: DevClusterHandle, tmp_path: Path) -> None:
        self.cluster = cluster
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(exist_ok=True)
        # A wide console: rich wraps table cells at 80 columns when output is piped.
        self.env = cluster.env(HPCTRAIN_HOME=str(tmp_path / "home"), COLUMNS="200")

    def __call__(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hpctrain", *args], env=self.env,
                              cwd=self.cwd, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)

    def ok(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        res = self(*args, timeout_s=timeout_s)
        assert res.returncode == 0, f"hpctrain {' '.join(args)}:\n{res.stdout}\n{res.stderr}"
        return res

    def json(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.ok(*args).stdout))

    def jobs(self, *args: str) -> list[dict[str, Any]]:
        """`status ARGS --json`'s jobs."""
        return list(json.loads(self.ok("status", *args, "--json").stdout)["jobs"])

    def wait(self, job_id: str, done: Callable[[dict[str, Any]], bool],
             timeout_s: float = 90.0) -> dict[str, Any]:
        """Poll `status JOBID` until `done(job)`; fail loudly otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            (job,) = self.jobs(job_id)
            if done(job):
                return job
            assert time.monotonic() < deadline, f"job {job_id} stuck: {job}"
            time.sleep(1)


def sacct(cluster: DevClusterHandle, job_id: str, fields: str) -> dict[str, str]:
    """One job's allocation row of sacct, by field name, once slurmdbd has the whole record.

    Under load slurmdbd can take a job's end before its start: until the start arrives the
    row is a stub named `allocation`, without partition, QOS, limits or requests.
    """
    asked = f"JobName,{fields}"

    def row() -> dict[str, str]:
        out = cluster.client().run(["sacct", "-n", "-P", "-X", "-j", job_id,
                                    f"--format={asked}"]).stdout
        (line,) = [ln for ln in out.splitlines() if ln.strip()]
        return dict(zip(asked.split(","), line.split("|"), strict=True))

    found = wait_for(row, 60, f"job {job_id}'s whole accounting record",
                     until=lambda r: r["JobName"] != "allocation")
    return {k: found[k] for k in fields.split(",")}

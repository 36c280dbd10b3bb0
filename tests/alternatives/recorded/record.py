"""Record the SLURM answers the start-time parsers are tested on, through hpctrain's own client.

    flock /tmp/hpctrain-cluster.lock sh -c 'export HPCTRAIN_HOME=$PWD/.hpctrain && \
        .venv/bin/hpctrain devcluster up && \
        SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
        .venv/bin/python tests/alternatives/recorded/record.py [--slurm-bin DIR]'

On the dev cluster (profile `local`, two nodes of two emulated GPUs), with one GPU busy on each
node: `sbatch --test-only` for a 1x2 job (must wait), a 2x1 job (starts now) and a 9-node one
(refused), and the state listing's squeue (with its expected-start field) for the busy job and
a pending 1x2 job, before and after the backfill pass. Each answer goes to
`slurm-<version>/<name>.json` with its entry in that folder's MANIFEST.json.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hpctrain.slurm.client import SlurmClient  # noqa: E402
from tests.recorded import (  # noqa: E402
    Recorder,
    RecordingClient,
    machine_of,
    parse_args,
    slurm_set,
    slurm_version,
)

HERE = Path(__file__).resolve().parent
JOB = "#!/bin/bash\n#SBATCH --nodes={n}\n#SBATCH --gres=gpu:emu:{g}\n#SBATCH --time=5\n" \
      "#SBATCH --ntasks-per-node=1\n#SBATCH --mem=500\n#SBATCH --output=/dev/null\nsleep {s}\n"


def main() -> int:
    parse_args(__doc__)
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        print("set SLURM_CONF to the dev cluster's slurm.conf", file=sys.stderr)
        return 2
    plain = SlurmClient.local(conf, timeout_s=30)
    version = slurm_version(plain)
    rec = Recorder(slurm_set(HERE, version), slurm_version=version,
                   machine=machine_of(plain.cluster_name(), "local"))
    c = RecordingClient(rec, slurm_conf=conf)
    with tempfile.TemporaryDirectory() as tmp:
        _record(c, Path(tmp))
    return 0


def _record(c: RecordingClient, work: Path) -> None:
    with c.saving("test_only_idle", "the cluster idle"):
        c.test_only(JOB.format(n=2, g=1, s=1))
    busy_script = work / "busy.sh"
    busy_script.write_text(JOB.format(n=2, g=1, s=120))
    with c.saving("sbatch_busy", "one emulated GPU taken on each node"):
        busy = c.submit(busy_script, cwd=work)
    _wait_running(c, busy)
    how = "while sbatch_busy's job runs"
    with c.saving("test_only_wait", how):
        c.test_only(JOB.format(n=1, g=2, s=1))
    with c.saving("test_only_now", how):
        c.test_only(JOB.format(n=2, g=1, s=1))
    with c.saving("test_only_refused", how):
        c.test_only(JOB.format(n=9, g=1, s=1))
    pending_script = work / "pending.sh"
    pending_script.write_text(JOB.format(n=1, g=2, s=1))
    with c.saving("sbatch_pending", how):
        pending = c.submit(pending_script, cwd=work)
    try:
        # Before the backfill pass (every 30 s by default) SLURM has no estimate yet: N/A.
        with c.saving("squeue_starts_unknown", "before the backfill pass"):
            c.squeue([busy, pending])
        _wait_for_estimate(c, pending, 120)
        with c.saving("squeue_starts", "after the backfill pass"):
            c.squeue([busy, pending])
    finally:
        c.scancel([busy, pending])


def _wait_running(c: SlurmClient, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while c.squeue([job_id])[job_id].slurm_state != "RUNNING":
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not start within 60 s")
        time.sleep(1)


def _wait_for_estimate(c: SlurmClient, job_id: str, limit_s: float) -> None:
    """Until the backfill pass has given the pending job an expected start (unrecorded polls)."""
    probe = SlurmClient.local(c.slurm_conf, timeout_s=30)
    deadline = time.monotonic() + limit_s
    while True:
        if probe.queue([job_id]).starts.get(job_id):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"no start estimate for job {job_id} after {limit_s} s")
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())

r"""Record jobs that end badly on the dev cluster: each one's sacct and its logs, for the unit
tests of `hpctrain why`'s parsers and rules (tests/diagnosis/test_recorded.py).

    flock /tmp/hpctrain-cluster.lock sh -c 'export HPCTRAIN_HOME=$PWD/.hpctrain && \
        .venv/bin/hpctrain devcluster up && \
        SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
        .venv/bin/python tests/diagnosis/recorded/record.py'

    bash scripts/in-slurm-root.sh sh -c 'hpctrain devcluster up && \
        SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
        python tests/diagnosis/recorded/record.py'        # SLURM 24.11

Each case is submitted with `hpctrain submit` from a project holding tests/diagnosis/programs.py,
waited for, and saved under `slurm-<version>/<case>/`: `sacct.json` (the command `why` runs,
through the client's own method), `stdout.log` and `stderr.log` (the job's output as SLURM wrote
it), and `metrics.json` where the packaged trainer ran; each file has its MANIFEST.json entry.
About 3 minutes (one case runs into its 1-minute time limit).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hpctrain.slurm.client import SlurmClient  # noqa: E402
from tests.diagnosis.programs import write_project  # noqa: E402
from tests.recorded import (  # noqa: E402
    Recorder,
    RecordingClient,
    machine_of,
    parse_args,
    slurm_set,
    slurm_version,
)
from tests.waits import wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
SPIRAL = "task: spiral\ntrainer: {max_epochs: 300, batch_size: 256}\ndata: {samples: 16384}\n"

# case -> the `hpctrain submit` arguments after `--profile local --json`.
CASES: dict[str, tuple[str, ...]] = {
    "exception": ("--nodes", "2", "--", "python", "-m", "pkg.exc"),
    "import_error": ("--", "python", "-m", "pkg.imp"),
    "missing_file": ("--", "python", "-m", "pkg.miss"),
    "signal": ("--", "bash", "-c", "kill -SEGV $$"),
    "exit_code": ("--", "bash", "-c", "exit 3"),
    "collective_timeout": ("--nodes", "2", "--", "python", "-m", "pkg.hang"),
    "time_limit": ("--time", "1", "--no-requeue", "--", "sleep", "300"),
    "warned_stop": ("--config", "long.yaml", "--time", "5", "--grace", "10", "--no-requeue"),
    "cancelled": ("--", "sleep", "120"),
    "completed": ("--config", "short.yaml", "--time", "10"),
}


def _submit(work: Path, env: dict[str, str], args: tuple[str, ...]) -> dict[str, str]:
    argv = [sys.executable, "-m", "hpctrain", "submit", "--profile", "local", "--json", *args]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                          check=True, timeout=120)
    job: dict[str, str] = json.loads(done.stdout)
    return job


def _ended(client: SlurmClient, job_id: str, timeout_s: float) -> None:
    wait_for(lambda: client.accounting(job_id).last, timeout_s, f"job {job_id} ended",
             until=lambda last: last is not None and last.state.is_terminal, poll_s=2)


def _provoke(client: SlurmClient, case: str, job: dict[str, str]) -> None:
    """What a case needs done to it while it runs."""
    job_id = str(job["job_id"])
    if case == "cancelled":
        wait_for(lambda: client.accounting(job_id).last, 120, "running",
                 until=lambda last: last is not None and last.state.value == "RUNNING")
        client.scancel([job_id])
    elif case == "warned_stop":
        run_dir = Path(job["run_dir"])
        wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
        client.run(["scancel", "--batch", "--signal=USR1", job_id])


def _save_files(rec: Recorder, case: str, job: dict[str, str], args: tuple[str, ...],
                version: str) -> None:
    command = shlex.join(["hpctrain", "submit", "--profile", "local", *args])
    for name, src in (("stdout.log", job["stdout"]), ("stderr.log", job["stderr"]),
                      ("metrics.json", str(Path(job["run_dir"]) / "metrics.json"))):
        if not Path(src).is_file():
            continue
        (rec.folder / case).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, rec.folder / case / name)
        rec.note(f"{case}/{name}", {
            "command": command, "program": f"the job's {name} (hpctrain's batch script, srun "
            f"and slurmstepd of slurm {version}, the programs of tests/diagnosis/programs.py)",
            "machine": rec.machine, "date": rec.date, "how": f"job {job['job_id']}"})


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
    client = RecordingClient(rec, slurm_conf=conf, text=True)
    work = Path(tempfile.mkdtemp(prefix="hpctrain-record-why-"))
    env = {**os.environ, "HPCTRAIN_HOME": str(work / "home")}
    try:
        write_project(work)
        (work / "long.yaml").write_text(SPIRAL)
        (work / "short.yaml").write_text("task: spiral\ntrainer: {max_epochs: 2}\n")
        jobs = {case: _submit(work, env, args) for case, args in CASES.items()}
        for case, job in jobs.items():
            _provoke(plain, case, job)
        for job in jobs.values():
            _ended(plain, str(job["job_id"]), 300)
        time.sleep(3)  # slurmdbd hears of a job's last step a moment after slurmctld
        for case, job in jobs.items():
            with client.saving(f"{case}/sacct", how=f"job {job['job_id']}, ended"):
                client.accounting(str(job["job_id"]))
            _save_files(rec, case, job, CASES[case], version)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({case: job["job_id"] for case, job in jobs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

r"""Record SLURM's answers to the job commands on the dev cluster, through hpctrain's own client.

    flock /tmp/hpctrain-cluster.lock sh -c 'export HPCTRAIN_HOME=$PWD/.hpctrain && \
        .venv/bin/hpctrain devcluster up && \
        SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
        .venv/bin/python tests/jobs/recorded/record.py [--slurm-bin DIR]'

The dev cluster runs profile `local` (2 nodes). Every command is made by the client's own
methods (submit, squeue, sacct, scontrol_job, scancel), so a recording holds exactly the command
line the client builds; each goes to `slurm-<version>/<name>.json` (argv, return code, stdout,
stderr) with its entry in that folder's MANIFEST.json. Takes about 2 minutes (one job runs into
its 1-minute time limit). Job ids differ from run to run; the tests read them from `jobs.json`.
`--slurm-bin` records the SLURM commands of another installation (another version's folder).
`record.py arrays` records squeue and sacct asked about a job array's tasks (a sweep's points),
running, ended and cancelled (about 1 minute). `record.py completing` records squeue listing a
cancelled job COMPLETING while sacct already says CANCELLED (about 20 s).

`record.py controller-down` records squeue, scontrol and scancel against a slurmctld stopped
(SIGSTOP: it takes connections but does not answer) and killed (SIGKILL: it refuses them), and
repairs the cluster after each (SIGCONT; `hpctrain devcluster up`, which restarts the dead
daemon). The trap repairs it too should the script itself die (about 1 minute):

    flock /tmp/hpctrain-cluster.lock bash -c 'export HPCTRAIN_HOME=$PWD/.hpctrain; \
        run=$HPCTRAIN_HOME/state/devcluster/run; \
        trap "kill -CONT \$(cat $run/slurmctld.pid); .venv/bin/hpctrain devcluster up" EXIT; \
        .venv/bin/hpctrain devcluster up && \
        SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf \
        .venv/bin/python tests/jobs/recorded/record.py controller-down'
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hpctrain.errors import SlurmError  # noqa: E402
from hpctrain.slurm.client import SlurmClient  # noqa: E402
from hpctrain.slurm.transport import LocalTransport  # noqa: E402
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


# What each scenario records: the job commands, or their answers while slurmctld is not there.
SCENARIOS = ("jobs", "controller-down", "arrays", "completing")


def main() -> int:
    args = parse_args(__doc__, scenarios=SCENARIOS)
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        print("set SLURM_CONF to the dev cluster's slurm.conf", file=sys.stderr)
        return 2
    plain = SlurmClient.local(conf, timeout_s=30)
    version = slurm_version(plain)
    rec = Recorder(slurm_set(HERE, version), slurm_version=version,
                   machine=machine_of(plain.cluster_name(), "local"))
    if args.scenario == "controller-down":
        _record_controller_down(rec, plain, conf)
        return 0
    c = RecordingClient(rec, slurm_conf=conf)
    work = Path(tempfile.mkdtemp(prefix="hpctrain-record-"))
    if args.scenario in ("arrays", "completing"):
        try:
            (_record_arrays if args.scenario == "arrays" else _record_completing)(c, rec, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    try:
        jobs = _record(c, rec, work, conf)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (rec.folder / "jobs.json").write_text(json.dumps(jobs, indent=2) + "\n")
    rec.note("jobs.json", {
        "command": "tests/jobs/recorded/record.py (the ids sbatch --parsable answered)",
        "program": f"record.py with sbatch (slurm {version})", "machine": rec.machine,
        "date": rec.date, "how": "scenario -> job id of this recording run"})
    print(json.dumps(jobs))
    return 0


def _record(c: RecordingClient, rec: Recorder, work: Path, conf: str) -> dict[str, str]:
    def sbatch(*opts: str, sleep: int = 0, code: int = 0) -> str:
        return c.submit(_script(work, sleep, code), cwd=work,
                        options=["--time=1", f"--output={work}/%x-%j.out", *opts])

    jobs: dict[str, str] = {}
    with c.saving("sbatch_parsable"):
        jobs["completed"] = sbatch("--job-name=ok")
    with c.saving("sbatch_refused"):
        _refused(lambda: c.submit(_script(work, 0, 0), cwd=work, options=["--nodes=5"]))
    jobs["failed"] = sbatch("--job-name=fails", code=3)
    jobs["running2"] = sbatch("--job-name=two nodes|pipe", "--nodes=2", sleep=25)
    jobs["dependency"] = sbatch("--job-name=dep", f"--dependency=afterok:{jobs['running2']}")
    jobs["begintime"] = sbatch("--job-name=later", "--begin=now+600")
    jobs["resources"] = sbatch("--job-name=waits", "--nodes=2", "--exclusive")
    jobs["cancelled"] = sbatch("--job-name=cancelme", sleep=60)
    jobs["timeout"] = sbatch("--job-name=slow", sleep=200)
    # Once the short jobs have ended and the two-node one runs: cancel a queued one.
    _wait(c, {jobs["running2"]: "RUNNING", jobs["completed"]: "COMPLETED",
              jobs["failed"]: "FAILED"}, 120)
    c.scancel([jobs["cancelled"]])
    _wait(c, {jobs["cancelled"]: "CANCELLED"}, 60)
    ids = list(jobs.values())
    # slurmdbd learns of jobs a few seconds after slurmctld: until then sacct omits them.
    _wait(c, {jobs["running2"]: "RUNNING", jobs["cancelled"]: "CANCELLED",
              jobs["completed"]: "COMPLETED", jobs["failed"]: "FAILED",
              **{jobs[k]: "PENDING" for k in ("dependency", "begintime", "resources", "timeout")}},
          60, accounting=True)
    mixed = ("jobs pending (Dependency, BeginTime, Resources), running, completed, failed "
             "(exit 3) and cancelled")
    _both_forms(c, "squeue_mixed", mixed, lambda client: client.squeue(ids))
    _both_forms(c, "sacct_mixed", "as squeue_mixed, moments later",
                lambda client: client.sacct(ids))
    for key in ("running2", "dependency", "completed"):
        with c.saving(f"scontrol_{key}"):
            c.scontrol_job(jobs[key])
    with c.saving("scancel_done"):
        c.scancel([jobs["completed"]])
    with c.saving("scancel_unknown"):
        _refused(lambda: c.scancel(["999999"]))
    with c.saving("squeue_unknown"):
        c.squeue(["999999"])
    with c.saving("scontrol_unknown"):
        c.scontrol_job("999999")
    _record_accounting_off(rec, conf, jobs["completed"])
    # Let the time limit pass and the controller forget the short jobs (MinJobAge=30).
    _wait(c, {jobs["timeout"]: "TIMEOUT"}, 180, accounting=True)
    c.scancel([jobs["begintime"], jobs["resources"]])
    # A job cancelled while pending may leave squeue at once, and the exclusive one may have
    # run by now: wait, in sacct, until both have ended.
    _wait_ended(c, [jobs["begintime"], jobs["resources"]], 60)
    _wait_forgotten(c, jobs["completed"], 120)
    how = "after the time limit of `timeout` passed and the controller forgot the short jobs"
    _both_forms(c, "squeue_after", how, lambda client: client.squeue(ids))
    _both_forms(c, "sacct_after", how, lambda client: client.sacct(ids))
    with c.saving("scontrol_failed_or_gone", how):
        c.scontrol_job(jobs["failed"])
    return jobs


def _record_arrays(c: RecordingClient, rec: Recorder, work: Path) -> None:
    """A sweep's array as the client asks about its tasks (ARRAY_TASK ids): tasks done, one
    failed (exit 3), two running, the rest pending behind the %2 throttle; then cancelled,
    where the tasks that never started are one row of sacct (`ARRAY_[4-7%2]`)."""
    script = work / "array.sh"
    script.write_text('#!/bin/bash\nsrun hostname\n'
                      'if [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then exit 3; fi\n'
                      'if [ "$SLURM_ARRAY_TASK_ID" -ge 2 ]; then sleep 120; fi\n')
    array = c.submit(script, cwd=work, options=[
        "--time=3", "--array=0-7%2", "--job-name=sweep", f"--output={work}/%x-%A_%a.out"])
    tasks = [f"{array}_{t}" for t in range(8)]
    _wait(c, {tasks[0]: "COMPLETED", tasks[1]: "FAILED", tasks[2]: "RUNNING",
              tasks[3]: "RUNNING"}, 120, accounting=True)
    how = (f"array {array} (--array=0-7%2): task 0 completed, 1 failed (exit 3), 2 and 3 "
           "running, 4-7 pending (JobArrayTaskLimit)")
    with c.saving("squeue_array_tasks", how):
        c.squeue(tasks)
    with c.saving("sacct_array_tasks", how + "; moments later"):
        c.sacct(tasks)
    c.scancel([array])
    _wait_ended(c, tasks[2:4], 60)
    with c.saving("sacct_array_cancelled", f"array {array} cancelled whole (scancel {array}) "
                                           "with tasks 2-3 running and 4-7 never started"):
        c.sacct(tasks)
    (rec.folder / "arrays.json").write_text(json.dumps({"array": array}, indent=2) + "\n")
    rec.note("arrays.json", {
        "command": "tests/jobs/recorded/record.py arrays (the id sbatch --parsable answered)",
        "program": f"record.py with sbatch (slurm {rec.slurm_version})",
        "machine": rec.machine, "date": rec.date, "how": "the array's job id"})


def _record_completing(c: RecordingClient, rec: Recorder, work: Path) -> None:
    """A job cancelled while it ignores SIGTERM: squeue lists it COMPLETING until KillWait's
    SIGKILL (5 s on the dev cluster) while sacct already says CANCELLED."""
    script = work / "ignores-term.sh"
    script.write_text("#!/bin/bash\ntrap '' TERM\nsleep 120\n")
    job = c.submit(script, cwd=work, options=[
        "--time=2", "--job-name=completing", f"--output={work}/%x-%j.out"])
    _wait(c, {job: "RUNNING"}, 60, accounting=True)
    c.scancel([job])
    how = f"job {job} (ignores SIGTERM) right after scancel, before KillWait's SIGKILL"
    for _ in range(20):
        with c.saving("squeue_completing", how):
            seen = c.squeue([job])
        if job in seen and seen[job].slurm_state.startswith("COMPLETING"):
            break
        time.sleep(0.2)
    else:
        raise SystemExit(f"job {job} never showed COMPLETING: {seen}")
    with c.saving("sacct_completing", how + "; moments later"):
        acct = c.sacct([job])
    if job not in acct or not acct[job].slurm_state.startswith("CANCELLED"):
        raise SystemExit(f"sacct does not say CANCELLED yet for {job}: {acct}")
    (rec.folder / "completing.json").write_text(json.dumps({"job": job}, indent=2) + "\n")
    rec.note("completing.json", {
        "command": "tests/jobs/recorded/record.py completing (the id sbatch --parsable answered)",
        "program": f"record.py with sbatch (slurm {rec.slurm_version})",
        "machine": rec.machine, "date": rec.date, "how": "the job's id"})


def _both_forms(c: RecordingClient, name: str, how: str,
                call: Callable[[RecordingClient], object]) -> None:
    """`name` as the client asks it; where that is JSON, the text form too (`name`_text), so
    that a test can check that both read the same."""
    with c.saving(name, how):
        call(c)
    if c.dialect().json:
        text = RecordingClient(c.recorder, c.slurm_conf, text=True)
        with text.saving(f"{name}_text", how + "; the text form, moments later"):
            call(text)


def _record_controller_down(rec: Recorder, plain: SlurmClient, conf: str) -> None:
    """squeue with slurmctld stopped; squeue, scontrol and scancel with it killed."""
    work = Path(tempfile.mkdtemp(prefix="hpctrain-record-"))
    pid_file = Path(_conf_value(conf, "SlurmctldPidFile"))
    # A real job to ask about; held, it runs on no node, so the outage disturbs no running job.
    job = plain.submit(_script(work, 0, 0), cwd=work, options=[
        "--hold", "--job-name=controller-down", "--time=1", f"--output={work}/%x-%j.out"])
    try:
        # squeue gives up after MessageTimeout (10 s) and its retries; 120 s is ample.
        c = RecordingClient(rec, slurm_conf=conf, timeout_s=120)
        with _slurmctld_signalled(plain, pid_file, signal.SIGSTOP), c.saving(
                "squeue_controller_stopped", "slurmctld stopped with SIGSTOP (it takes "
                                             f"connections but does not answer); job {job} held"):
            _refused(lambda: c.squeue([job]))
        patient = RecordingClient(rec, slurm_conf=conf, timeout_s=120,
                                  transport=_PatientTransport(conf))
        how = (f"slurmctld killed with SIGKILL (its port refuses connections); job {job} held; "
               "the client's probe of the port turned off, so SLURM's own answer is recorded")
        with _slurmctld_signalled(plain, pid_file, signal.SIGKILL):
            with patient.saving("squeue_controller_down", how):
                _refused(lambda: patient.squeue([job]))
            with patient.saving("scontrol_controller_down", how):
                _refused(lambda: patient.scontrol_job(job))
            with patient.saving("scancel_controller_down", how):
                _refused(lambda: patient.scancel([job]))
    finally:
        # Should the controller not be back, the error that says so is the one to see.
        _refused(lambda: plain.scancel([job]))
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class _PatientTransport(LocalTransport):
    """Lets a command run until SLURM itself gives up. The client looks at the controller's
    port once a command is slower than PROBE_AFTER_S and, finding it closed, ends the command
    with its own error: SLURM's answer, which the error is made from, would go unrecorded."""

    def controller_down(self, command: str) -> None:
        return None


@contextlib.contextmanager
def _slurmctld_signalled(plain: SlurmClient, pid_file: Path, sig: int) -> Iterator[None]:
    """slurmctld stopped (SIGSTOP) or killed for the block; answering again after it."""
    pid = int(pid_file.read_text())
    os.kill(pid, sig)
    try:
        if sig == signal.SIGKILL:
            wait_for(lambda: plain.transport.controller_down("squeue"), 60,
                     "refusal of connections by the killed slurmctld's port")
        yield
    finally:
        if sig == signal.SIGSTOP:
            os.kill(pid, signal.SIGCONT)
        else:
            # Restarts the daemons that are not running: slurmctld alone.
            subprocess.run([sys.executable, "-m", "hpctrain", "devcluster", "up"], check=True)
        wait_for(lambda: _answers(plain), 120, "answer from the restored slurmctld", poll_s=1)


def _answers(plain: SlurmClient) -> bool:
    try:
        return plain.run(["squeue", "--noheader", "--format=%i"], check=False).returncode == 0
    except SlurmError:  # the client's own verdict on a controller that is down or silent
        return False


def _conf_value(conf: str, key: str) -> str:
    found = re.search(rf"(?m)^{key}=(\S+)", Path(conf).read_text())
    if found is None:
        raise SystemExit(f"{conf} names no {key}")
    return found.group(1)


def _script(work: Path, sleep: int, code: int) -> Path:
    """A batch script that sleeps and exits as told (sbatch takes the script last, bare)."""
    path = work / f"job-sleep{sleep}-exit{code}.sh"
    path.write_text(f"#!/bin/bash\nsrun hostname\nsleep {sleep}\nexit {code}\n")
    return path


def _record_accounting_off(rec: Recorder, conf: str, job_id: str) -> None:
    """sacct reads AccountingStorageType from its own slurm.conf: a copy with accounting off."""
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "slurm-noacct.conf"
        off.write_text(re.sub(r"(?m)^AccountingStorageType=.*$",
                              "AccountingStorageType=accounting_storage/none",
                              Path(conf).read_text()))
        client = RecordingClient(rec, slurm_conf=str(off))
        with client.saving("sacct_disabled", "SLURM_CONF: a copy of the cluster's slurm.conf "
                                             "with AccountingStorageType=accounting_storage/none"):
            _refused(lambda: client.sacct([job_id]))


def _refused(call: Callable[[], object]) -> None:
    with contextlib.suppress(SlurmError):  # the refusal is what is recorded
        call()


def _wait(c: RecordingClient, want: dict[str, str], limit_s: float,
          accounting: bool = False) -> None:
    """Until each job is in its state (squeue's, or sacct's with `accounting`)."""
    deadline = time.monotonic() + limit_s
    while True:
        seen = (c.sacct if accounting else c.squeue)(list(want))
        states = {j: seen[j].slurm_state.split()[0] if j in seen else "" for j in want}
        if all(states[j] == s for j, s in want.items()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs not in the states wanted {want} after {limit_s} s: {states}")
        time.sleep(1)


def _wait_ended(c: RecordingClient, ids: list[str], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not all(j in (seen := c.sacct(ids)) and seen[j].state.is_terminal for j in ids):
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {ids} had not ended after {limit_s} s")
        time.sleep(1)


def _wait_forgotten(c: RecordingClient, job_id: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while job_id in c.squeue([job_id]):
        if time.monotonic() > deadline:
            raise SystemExit(f"the controller still lists job {job_id} after {limit_s} s")
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())

"""Record the output of SLURM's commands on the dev cluster into JSON files next to this one.

    HPCTRAIN_HOME=/work/main/.hpctrain hpctrain devcluster up      # profile local, 2 nodes
    SLURM_CONF=.hpctrain/state/devcluster/etc/slurm.conf python tests/jobs/recorded/record.py

Each file holds one command's argv, return code, stdout and stderr, exactly as SLURM printed
them; tests/jobs/test_parsers.py feeds them to hpctrain.slurm.parsers. Takes about 2 minutes
(one job runs into its 1-minute time limit). Job ids differ from run to run; the tests read
the ids from the `jobs.json` this script writes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from hpctrain.slurm.client import Result, SlurmClient
from hpctrain.slurm.parsers import SACCT_FORMAT, SQUEUE_FORMAT

HERE = Path(__file__).resolve().parent


def save(name: str, res: Result) -> Result:
    data = {"argv": list(res.argv), "returncode": res.returncode, "stdout": res.stdout,
            "stderr": res.stderr}
    (HERE / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    return res


def main() -> int:
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        print("set SLURM_CONF to the dev cluster's slurm.conf", file=sys.stderr)
        return 2
    c = SlurmClient.local(conf, timeout_s=30)
    work = Path(tempfile.mkdtemp(prefix="hpctrain-record-"))
    script = work / "job.sh"
    script.write_text("#!/bin/bash\nsrun hostname\nsleep \"${1:-0}\"\nexit \"${2:-0}\"\n")

    def sbatch(name: str | None, *opts: str, args: tuple[str, ...] = ()) -> str:
        argv = ["sbatch", "--parsable", "--time=1", f"--output={work}/%x-%j.out", *opts,
                str(script), *args]
        res = c.run(argv, check=False, cwd=work)
        if name:
            save(name, res)
        return res.stdout.strip().split(";")[0]

    jobs: dict[str, str] = {}
    jobs["completed"] = sbatch("sbatch_parsable", "--job-name=ok")
    save("sbatch_refused", c.run(["sbatch", "--parsable", "--nodes=5", str(script)],
                                 check=False, cwd=work))
    jobs["failed"] = sbatch(None, "--job-name=fails", args=("0", "3"))
    jobs["running2"] = sbatch(None, "--job-name=two nodes|pipe", "--nodes=2", args=("25",))
    jobs["dependency"] = sbatch(None, "--job-name=dep",
                                f"--dependency=afterok:{jobs['running2']}")
    jobs["begintime"] = sbatch(None, "--job-name=later", "--begin=now+600")
    jobs["resources"] = sbatch(None, "--job-name=waits", "--nodes=2", "--exclusive")
    jobs["cancelled"] = sbatch(None, "--job-name=cancelme", args=("60",))
    jobs["timeout"] = sbatch(None, "--job-name=slow", args=("200",))
    time.sleep(6)
    c.run(["scancel", jobs["cancelled"]])
    time.sleep(2)
    ids = list(jobs.values())
    save("squeue_mixed", c.run(["squeue", "--noheader", "--states=all", "--jobs", ",".join(ids),
                                "--format", SQUEUE_FORMAT], check=False))
    save("sacct_mixed", c.run(["sacct", "--allocations", "--parsable2", "--noheader", "--jobs",
                               ",".join(ids), "--format", SACCT_FORMAT], check=False))
    for key in ("running2", "dependency", "completed"):
        save(f"scontrol_{key}", c.run(["scontrol", "--oneliner", "show", "job", jobs[key]],
                                      check=False))
    save("scancel_done", c.run(["scancel", jobs["completed"]], check=False))
    save("scancel_unknown", c.run(["scancel", "999999"], check=False))
    save("squeue_unknown", c.run(["squeue", "--noheader", "--states=all", "--jobs", "999999",
                                  "--format", SQUEUE_FORMAT], check=False))
    save("scontrol_unknown", c.run(["scontrol", "--oneliner", "show", "job", "999999"],
                                   check=False))
    # Accounting off, honestly: sacct reads AccountingStorageType from its own slurm.conf.
    off = work / "slurm-noacct.conf"
    off.write_text("".join(
        "AccountingStorageType=accounting_storage/none\n"
        if ln.startswith("AccountingStorageType=") else ln
        for ln in Path(conf).read_text().splitlines(keepends=True)
    ))
    save("sacct_disabled", SlurmClient.local(str(off)).run(
        ["sacct", "--allocations", "--parsable2", "--noheader", "--jobs", jobs["completed"],
         "--format", SACCT_FORMAT], check=False))
    # Let the time limit pass and the controller forget the short jobs (MinJobAge=30).
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        res = c.run(["sacct", "-X", "-P", "-n", "-j", jobs["timeout"], "-o", "State"],
                    check=False)
        if res.stdout.startswith("TIMEOUT"):
            break
        time.sleep(5)
    c.run(["scancel", jobs["begintime"], jobs["resources"]], check=False)
    time.sleep(3)
    save("squeue_after", c.run(["squeue", "--noheader", "--states=all", "--jobs",
                                ",".join(ids), "--format", SQUEUE_FORMAT], check=False))
    save("sacct_after", c.run(["sacct", "--allocations", "--parsable2", "--noheader", "--jobs",
                               ",".join(ids), "--format", SACCT_FORMAT], check=False))
    save("scontrol_failed_or_gone", c.run(["scontrol", "--oneliner", "show", "job",
                                           jobs["failed"]], check=False))
    (HERE / "jobs.json").write_text(json.dumps(jobs, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

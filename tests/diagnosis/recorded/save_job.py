r"""Save one ended job of the dev cluster as a recorded case for the unit tests of `why`:
its sacct (the very command `why` runs) and its logs, under `<set>/<case>/`, with MANIFEST.json
entries. Used for the multi-rank fault matrix (examples/faults/ddp_faults.py), whose jobs are
run by hand or by tests/diagnosis/test_faults_cluster.py:

    SLURM_CONF=$HPCTRAIN_HOME/state/devcluster/etc/slurm.conf .venv/bin/python \
        tests/diagnosis/recorded/save_job.py multirank-slurm-22.05 rank_raised 1 \
        RUN_DIR "hpctrain submit ... -- python train.py --fault raise --rank 3 --at 2"
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hpctrain.slurm import accounting  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(set_name: str, case: str, job_id: str, run_dir: str, command: str) -> None:
    folder = HERE / set_name / case
    folder.mkdir(parents=True, exist_ok=True)
    argv = accounting.argv(job_id)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    (folder / "sacct.json").write_text(json.dumps(
        {"argv": argv, "returncode": done.returncode, "stdout": done.stdout,
         "stderr": done.stderr}, indent=2) + "\n")
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    machine = (f"hpctrain dev cluster `hpctrain-dev` (hpctrain devcluster up, profile local) "
               f"on {platform.platform()}")
    notes = {"sacct.json": {"command": " ".join(argv), "program": f"sacct ({version})"}}
    for name, pattern in (("stdout.log", "*.out"), ("stderr.log", "*.err")):
        src = next(Path(run_dir).glob(pattern))
        shutil.copyfile(src, folder / name)
        notes[name] = {"command": command, "program": f"the job's {src.name} (hpctrain's batch "
                       f"script, srun and slurmstepd of {version}, torch's gloo)"}
    manifest_path = HERE / set_name / "MANIFEST.json"
    manifest = (json.loads(manifest_path.read_text()) if manifest_path.exists()
                else {"files": {}})
    for name, note in notes.items():
        manifest["files"][f"{case}/{name}"] = {**note, "machine": machine,
                                               "date": time.strftime("%Y-%m-%d"),
                                               "how": f"job {job_id}"}
    manifest["files"] = dict(sorted(manifest["files"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:6])

"""`profiles probe` as a submission: a one-minute job asks a compute node what only it knows.

The job's header comes from the normal plan (partition, account, QOS and GPU rules of the
profile); its body prints one JSON line (hpctrain.profiles.probe reads it), taken from the
job's output after the job watcher saw it end.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.profiles.probe import MARKER
from hpctrain.submission.prepare import Prepared, prepare
from hpctrain.submission.submit import Submitted, submit
from hpctrain.tracking.watcher import JobWatcher
from hpctrain.values.rundir import RunFile

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest

# Header lines of the training script that a probe has no use for (no trainer to warn).
_SKIP = ("--signal", "--requeue", "--no-requeue", "--open-mode")
# Runs on the compute node; stdlib only, every program optional. ARPHRD_INFINIBAND is 32.
PROBE_PY = r'''
import json, os, shutil, socket, subprocess
def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
net = []
for name in sorted(os.listdir("/sys/class/net")):
    base = "/sys/class/net/" + name
    kind = read(base + "/type")
    net.append({"name": name, "infiniband": kind == "32", "state": read(base + "/operstate")})
hcas = []
ib = "/sys/class/infiniband"
for hca in sorted(os.listdir(ib)) if os.path.isdir(ib) else []:
    ports = []
    for port in sorted(os.listdir(ib + "/" + hca + "/ports")):
        p = ib + "/" + hca + "/ports/" + port
        ports.append({"port": port, "state": read(p + "/state"), "rate": read(p + "/rate"),
                      "link_layer": read(p + "/link_layer")})
    hcas.append({"name": hca, "ports": ports})
gpus, driver, smi = [], None, shutil.which("nvidia-smi")
if smi:
    out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        name, _, driver = (x.strip() for x in line.rpartition(","))
        gpus.append(name)
print(@MARKER@ + json.dumps({
    "host": socket.gethostname(), "net": net, "hcas": hcas, "nvidia_smi": smi is not None,
    "gpus": gpus, "driver": driver,
    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}))
'''.replace("@MARKER@", repr(MARKER))


def probe_script(rendered: str) -> str:
    """The probe job: the plan's #SBATCH header, then the probe."""
    header = [ln for ln in rendered.splitlines() if ln.startswith("#SBATCH ")
              and not ln.removeprefix("#SBATCH ").startswith(_SKIP)]
    body = ["set -eo pipefail",
            'command -v python3 >/dev/null || { echo "hpctrain: no python3 on $(hostname)" >&2;'
            " exit 1; }",
            "python3 - <<'HPCTRAIN_PROBE'", PROBE_PY.strip(), "HPCTRAIN_PROBE"]
    return "\n".join(["#!/bin/bash", "# hpctrain profiles probe", *header, "", *body]) + "\n"


def prepare_probe(req: JobRequest, workdir: Path) -> Prepared:
    """The probe as a normal submission: its own run directory, the plan's header."""
    # Not the trainer: no warning signal, no requeue; the body below replaces the launch.
    req = dataclasses.replace(req, nodes=1, time="1", job_name="hpctrain-probe",
                              command=("python3", "-"), requeue=False,
                              monitor_interval_s=None, chain=1, after=(), snapshot=False)
    prep = prepare(req, workdir)
    script = probe_script(prep.script)
    files = tuple(RunFile(f.path, text=script, mode=f.mode) if f.path == prep.script_path
                  else f for f in prep.files)
    return dataclasses.replace(prep, script=script, files=files)


def run_probe(prep: Prepared, place: Place, history: History,
              on_submit: Callable[[Submitted], None] = lambda _: None,
              sleep: Callable[[float], None] = time.sleep) -> tuple[Submitted, str]:
    """Submit the probe, wait for it with the job watcher, return its output."""
    done = submit(prep, place, history)
    on_submit(done)
    watcher = JobWatcher(place.slurm_client(), history, done.cluster)
    record = done.record
    while True:
        poll = watcher.wait_for_change(record, sleep=sleep)
        record = poll.record
        if poll.done:
            break
        if poll.error is not None:
            # SLURM did not answer: the job runs on regardless; ask again after a back-off.
            sleep(poll.wait_s)
    got = place.read_file(Path(done.stdout_path or ""), None)
    text = got[0].decode(errors="replace") if got else ""
    if MARKER not in text:
        raise HpctrainError(f"probe job {done.job_id} ended {record.state} without findings",
                            f"read its output: {done.stdout_path} and {done.stderr_path}")
    return done, text

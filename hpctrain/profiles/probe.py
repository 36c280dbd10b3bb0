"""`profiles probe`: a one-minute job asks a compute node what only it knows, and the findings
go into the user's profile (one that `extends:` the shipped one; a shipped file is never edited).

The job's header comes from the normal plan (partition, account, QOS and GPU rules of the
profile); its body prints one JSON line, read back from the job's output after the job watcher
saw it end.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain import paths
from hpctrain.errors import HpctrainError, ProfileError
from hpctrain.files import write_atomic

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.jobs.prepare import Prepared
    from hpctrain.jobs.submit import Submitted
    from hpctrain.plan import JobRequest
    from hpctrain.slurm.client import SlurmClient

MARKER = "HPCTRAIN-PROBE "
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
print("HPCTRAIN-PROBE " + json.dumps({
    "host": socket.gethostname(), "net": net, "hcas": hcas, "nvidia_smi": smi is not None,
    "gpus": gpus, "driver": driver,
    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}))
'''


@dataclass(frozen=True)
class Findings:
    """What the compute node reported."""

    host: str
    net: list[dict[str, Any]]
    hcas: list[dict[str, Any]]
    nvidia_smi: bool
    gpus: list[str]
    driver: str | None
    cuda_visible_devices: str | None = None

    def ib_interfaces(self) -> list[str]:
        """IPoIB interfaces that are up (NCCL's socket interface on an InfiniBand cluster)."""
        return [n["name"] for n in self.net if n.get("infiniband") and n.get("state") == "up"]

    def active_hcas(self) -> list[str]:
        """HCAs with an active InfiniBand port (NCCL_IB_HCA)."""
        return [h["name"] for h in self.hcas if any(
            "ACTIVE" in (p.get("state") or "") and p.get("link_layer") == "InfiniBand"
            for p in h["ports"])]

    def summary(self) -> list[str]:
        gpus = f"{len(self.gpus)} GPU(s): {', '.join(sorted(set(self.gpus)))}" if self.gpus else (
            "no GPU seen" + ("" if self.nvidia_smi else " (no nvidia-smi)"))
        hcas = ", ".join(self.active_hcas()) or "no active InfiniBand HCA"
        ifs = ", ".join(self.ib_interfaces()) or "no IPoIB interface up"
        return [f"node {self.host}", gpus, f"CUDA driver {self.driver or 'unknown'}", hcas, ifs]


def parse_findings(text: str) -> Findings:
    """The probe's JSON line from the job's output."""
    for line in text.splitlines():
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER):])
            names = {f.name for f in dataclasses.fields(Findings)}
            return Findings(**{k: v for k, v in data.items() if k in names})
    raise HpctrainError("the probe job printed no findings",
                        "look at the job's output (`hpctrain logs JOB`)")


def nccl_settings(findings: Findings) -> dict[str, str]:
    """NCCL values the findings settle; nothing is written for what was not seen."""
    out = {}
    if findings.ib_interfaces():
        out["socket_ifname"] = ",".join(findings.ib_interfaces())
    if findings.active_hcas():
        out["ib_hca"] = ",".join(findings.active_hcas())
    return out


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
    from hpctrain.jobs.prepare import RunFile, prepare

    # Not the trainer: no warning signal, no requeue; the body below replaces the launch.
    req = dataclasses.replace(req, nodes=1, time="1", job_name="hpctrain-probe",
                              command=("python3", "-"), requeue=False,
                              monitor_interval_s=None, chain=1, after=())
    prep = prepare(req, workdir)
    script = probe_script(prep.script)
    files = tuple(RunFile(f.path, text=script, mode=f.mode) if f.path == prep.script_path
                  else f for f in prep.files)
    return dataclasses.replace(prep, script=script, files=files)


def run_probe(prep: Prepared, client: SlurmClient, history: History,
              on_submit: Callable[[Submitted], None] = lambda _: None,
              sleep: Callable[[float], None] = time.sleep) -> tuple[Submitted, str]:
    """Submit the probe, wait for it with the job watcher, return its output."""
    from hpctrain.jobs.submit import submit
    from hpctrain.jobs.watcher import JobWatcher

    done = submit(prep, client, history)
    on_submit(done)
    watcher = JobWatcher(client, history, done.cluster)
    record = done.record
    while True:
        poll = watcher.wait_for_change(record, sleep=sleep)
        record = poll.record
        if poll.done:
            break
        if poll.error is not None:
            # SLURM did not answer: the job runs on regardless; ask again after a back-off.
            sleep(poll.wait_s)
    try:
        text = Path(done.stdout_path or "").read_text(errors="replace")
    except OSError:
        text = ""
    if MARKER not in text:
        raise HpctrainError(f"probe job {done.job_id} ended {record.state} without findings",
                            f"read its output: {done.stdout_path} and {done.stderr_path}")
    return done, text


@dataclass
class Written:
    path: Path | None
    settings: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)


def write_findings(name: str, shipped: bool, findings: Findings) -> Written:
    """Put the NCCL findings into the user's profile NAME, keeping every value the user set."""
    settings = nccl_settings(findings)
    path = paths.user_profiles_dir() / f"{name}.yaml"
    if not settings:
        return Written(None)
    data = _user_data(path, name, shipped)
    nccl = data.setdefault("nccl", {})
    if not isinstance(nccl, dict):
        raise ProfileError(f"{path}: nccl must be a mapping", "fix the file, then probe again")
    kept = {k: str(nccl[k]) for k in settings if nccl.get(k) not in (None, settings[k])}
    for k, v in settings.items():
        if k not in kept:
            nccl[k] = v
    import yaml

    header = "".join(f"# probe: {line}\n" for line in findings.summary())
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        # Comments do not survive the rewrite: the file as it was stays beside it.
        write_atomic(path.with_name(path.name + ".bak"), path.read_text(encoding="utf-8"))
    write_atomic(path, header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return Written(path, {k: v for k, v in settings.items() if k not in kept}, kept)


def _user_data(path: Path, name: str, shipped: bool) -> dict[str, Any]:
    import yaml

    from hpctrain import yamlfile

    if not path.exists():
        if not shipped:
            raise ProfileError(f"profile {name} is no shipped profile and has no user file",
                               "probe a profile listed by `hpctrain profiles list`")
        return {"extends": name}
    try:
        data = yamlfile.load(yamlfile.read_text(path))
    except yamlfile.YamlInputError as e:
        raise ProfileError(f"{path}: {e.what}", e.fix) from None
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML ({e})", "fix the syntax") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile must be a YAML mapping", "fix the file")
    return data

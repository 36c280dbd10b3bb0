"""`profiles probe`'s findings: what a compute node said (parsed from the probe job's output,
hpctrain.submission.probe), and how they go into the user's profile (one that `extends:` the shipped
one; a shipped file is never edited). Pure but for writing that profile.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpctrain.errors import HpctrainError, ProfileError
from hpctrain.files import paths
from hpctrain.files.atomic import write_atomic
from hpctrain.profiles.loader import read_yaml_mapping

# The probe job prints its findings as one JSON line after this marker.
MARKER = "HPCTRAIN-PROBE "


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


@dataclass
class Written:
    """What `profiles probe` wrote into a profile, and what it kept as it was."""

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
    if not path.exists():
        if not shipped:
            raise ProfileError(f"profile {name} is no shipped profile and has no user file",
                               "probe a profile listed by `hpctrain profiles list`")
        return {"extends": name}
    return read_yaml_mapping(path, "fix the file")

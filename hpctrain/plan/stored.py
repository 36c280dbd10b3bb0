"""A job request as its run directory keeps it (`request.json`), so that `rerun` can plan the
same job again with another topology. Pure: text in, values out."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hpctrain.errors import HpctrainError
from hpctrain.plan.model import JobRequest
from hpctrain.profiles.model import Profile

FORMAT = 1
# Kept elsewhere (the profile: profile.yaml), or facts of one submission rather than requests:
# where this run writes, a race's alternative, `render`'s preview, a sweep's array (its points
# are in sweep.json), the quarantine and the maintenance windows as that submit found them.
_NOT_KEPT = frozenset({"profile", "preview", "log_dir", "run_dir", "code_dir", "race",
                       "array", "quarantined", "partition_nodes", "maintenance", "now",
                       "held_gpu_hours"})


def request_json(req: JobRequest) -> str:
    """`req` as JSON: every option as asked, the packaged trainer's resolved settings."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(JobRequest):
        if f.name in _NOT_KEPT:
            continue
        value = getattr(req, f.name)
        if f.name == "trainer":
            value = value.model_dump(mode="json") if value is not None else None
        elif isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, Sequence) and not isinstance(value, str):
            value = list(value)
        data[f.name] = value
    return json.dumps({"format": FORMAT, "request": data}, indent=2, sort_keys=True) + "\n"


def request_from_json(text: str, profile: Profile, where: str) -> JobRequest:
    """The request `request_json` wrote, planned again with `profile` (the job's own)."""
    try:
        doc = json.loads(text)
        data = dict(doc["request"])
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, not {FORMAT}")
    except (ValueError, KeyError, TypeError) as e:
        raise HpctrainError(f"{where}: not a request hpctrain can read ({e})",
                            "rerun it without a new topology, or submit it again") from None
    fields = {f.name: f for f in dataclasses.fields(JobRequest)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise HpctrainError(f"{where}: unknown fields {', '.join(unknown)}",
                            "it was written by another hpctrain version; submit it again")
    if data.get("trainer") is not None:
        from pydantic import ValidationError

        from hpctrain.trainconfig.model import TrainConfig
        try:
            data["trainer"] = TrainConfig.model_validate(data["trainer"])
        except ValidationError as e:
            raise HpctrainError(f"{where}: the trainer settings do not validate ({e})",
                                "submit it again from the project") from None
    for name in ("sbatch_args", "command", "trainer_args", "after", "in_place",
                 "container_binds"):
        if name in data:
            data[name] = tuple(data[name])
    return JobRequest(profile=profile, **data)

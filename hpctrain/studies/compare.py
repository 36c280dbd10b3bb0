"""What differs between two runs (`hpctrain diff`): code, settings, topology, environment,
profile. Read from each run directory and code snapshot through the job's place; compared as
values."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpctrain.errors import HpctrainError
from hpctrain.history import JobRecord
from hpctrain.snapshots.objects import object_path
from hpctrain.snapshots.spec import store_of
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir

# A file's text, or None where it does not exist.
Reader = Callable[[Path], bytes | None]
# Plan keys that name a run rather than describe it.
_NOT_SETTINGS = frozenset({"command", "notes", "job_name"})


@dataclass(frozen=True)
class RunFacts:
    """One run as `diff` reads it."""

    job_id: str
    plan: dict[str, Any]
    snapshot: str | None
    manifest: dict[str, Any] | None
    environment: dict[str, Any] | None
    profile: str | None
    store: Path | None
    # The distributions the packaged trainer's run imported (imports.json), if it wrote one.
    imports: dict[str, Any] | None = None


@dataclass(frozen=True)
class Change:
    """One setting, package or plan value: its value in run A and in run B (None: absent)."""

    what: str
    a: object
    b: object


@dataclass(frozen=True)
class Comparison:
    """How two runs differ: code, settings, topology, environment."""

    a: str
    b: str
    code: list[str] = field(default_factory=list)  # a unified diff, line by line
    code_note: str | None = None  # why the code could not be compared
    settings: list[Change] = field(default_factory=list)
    topology: list[Change] = field(default_factory=list)
    environment: list[Change] = field(default_factory=list)
    profile: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not (self.code or self.code_note or self.settings or self.topology
                    or self.environment or self.profile)

    def as_dict(self) -> dict[str, object]:
        def changes(items: list[Change]) -> list[dict[str, object]]:
            return [{"what": c.what, "a": c.a, "b": c.b} for c in items]

        return {"a": self.a, "b": self.b, "same": self.same, "code": self.code,
                "code_note": self.code_note, "settings": changes(self.settings),
                "topology": changes(self.topology), "environment": changes(self.environment),
                "profile": self.profile}


def _json(read: Reader, path: Path) -> dict[str, Any] | None:
    data = read(path)
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_facts(record: JobRecord, read: Reader) -> RunFacts:
    """The run directory's record of what ran (run.json, environment, profile, snapshot)."""
    if not record.run_dir:
        raise HpctrainError(f"job {record.job_id} has no run directory in the history",
                            "diff compares jobs submitted by hpctrain")
    run_dir = RunDir(record.run_dir)
    info = _json(read, run_dir.run_info)
    if info is None:
        raise HpctrainError(f"job {record.job_id}: {run_dir.run_info} is missing",
                            "the run directory was removed or never completed")
    store = store_of(run_dir.root) if record.snapshot else None
    manifest = (_json(read, store / "manifests" / f"{record.snapshot}.json")
                if store is not None else None)
    profile = read(run_dir.profile)
    return RunFacts(job_id=record.job_id, plan=dict(info.get("plan") or {}),
                    snapshot=record.snapshot, manifest=manifest,
                    environment=_json(read, run_dir.environment),
                    profile=profile.decode("utf-8", "replace") if profile is not None else None,
                    store=store, imports=_json(read, run_dir.imports))


def trainer_settings(command: Sequence[str]) -> dict[str, str] | None:
    """`--task T --set k=v ...` of the packaged trainer's command as {"task": T, k: v}."""
    args = list(command)
    if "hpctrain.trainer" not in args:
        return None
    found: dict[str, str] = {}
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--task":
            found["task"] = value
        elif flag == "--set" and "=" in value:
            key, _, v = value.partition("=")
            found[key] = v
    return found


def _changes(a: Mapping[str, Any], b: Mapping[str, Any], absent: object = None) -> list[Change]:
    return [Change(k, a.get(k, absent), b.get(k, absent)) for k in sorted(set(a) | set(b))
            if a.get(k, absent) != b.get(k, absent)]


# The shape of what the job holds (GPU-hours: its GPUs for its time, derived, not a setting).
_TOPOLOGY = ("nodes", "gpus_per_node", "total_gpus", "tasks_per_node", "cpus_per_task",
             "cpus_per_node", "mem_mb_per_node", "gpu_type", "partition", "node_types",
             "constraint", "gpu_hours")


def settings_and_topology(a: RunFacts, b: RunFacts) -> tuple[list[Change], list[Change]]:
    """The trainer's settings (or the command) and the plan's other values that differ."""
    sa, sb = (trainer_settings(f.plan.get("command") or ()) for f in (a, b))
    if sa is not None and sb is not None:
        settings = _changes(sa, sb, absent="(default)")
    else:
        settings = ([Change("command", a.plan.get("command"), b.plan.get("command"))]
                    if a.plan.get("command") != b.plan.get("command") else [])
    plan_a = {k: v for k, v in a.plan.items() if k not in _NOT_SETTINGS}
    plan_b = {k: v for k, v in b.plan.items() if k not in _NOT_SETTINGS}
    topo = [c for c in _changes(plan_a, plan_b) if c.what in _TOPOLOGY]
    settings += [c for c in _changes(plan_a, plan_b) if c.what not in _TOPOLOGY]
    return settings, topo


def environment_changes(a: RunFacts, b: RunFacts) -> list[Change]:
    if a.environment is None or b.environment is None:
        return []
    changes = _changes({"python": a.environment.get("python")},
                       {"python": b.environment.get("python")})
    if a.environment.get("packages_sha256") != b.environment.get("packages_sha256"):
        imported = {name for f in (a, b) for name in ((f.imports or {}).get("packages") or {})}
        # The packages the runs imported first, marked: those are the ones that can matter.
        found = _changes(a.environment.get("packages") or {},
                         b.environment.get("packages") or {}, absent="(not installed)")
        changes += sorted((dataclasses.replace(c, what=f"{c.what} (imported)")
                           if c.what in imported else c for c in found),
                          key=lambda c: (not c.what.endswith("(imported)"), c.what))
    return changes


def _files(manifest: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    out = {str(f[0]): (str(f[1]), bool(f[2])) for f in manifest.get("files", [])}
    out.update({str(link[0]): ("-> " + str(link[1]), False) for link in manifest.get("links", [])})
    return out


def _text(read: Reader, store: Path, digest: str, executable: bool) -> list[str] | None:
    if digest.startswith("-> "):
        return [digest + "\n"]
    data = read(object_path(store, digest, executable))
    if data is None:
        return ["(content no longer in the store: hpctrain gc removed it)\n"]
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def code_changes(a: RunFacts, b: RunFacts, read: Reader) -> tuple[list[str], str | None]:
    """A unified diff of the two snapshots, or why there is none to make."""
    for f in (a, b):
        if f.snapshot is None:
            return [], f"job {f.job_id} ran the project in place (no snapshot): its code is " \
                       "not known"
        if f.manifest is None:
            return [], f"job {f.job_id}'s snapshot {f.snapshot} is no longer in its store"
    assert a.manifest is not None and b.manifest is not None and a.store and b.store
    fa, fb = _files(a.manifest), _files(b.manifest)
    lines: list[str] = []
    for path in sorted(set(fa) | set(fb)):
        if fa.get(path) == fb.get(path):
            continue
        old = _text(read, a.store, *fa[path]) if path in fa else []
        new = _text(read, b.store, *fb[path]) if path in fb else []
        if old is None or new is None:
            lines.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        lines += difflib.unified_diff(old, new, f"a/{path}" if path in fa else "/dev/null",
                                      f"b/{path}" if path in fb else "/dev/null")
    return [ln if ln.endswith("\n") else ln + "\n" for ln in lines], None


def compare(a: RunFacts, b: RunFacts, read_a: Reader, read_b: Reader) -> Comparison:
    """Everything that differs between run A and run B."""
    def read(path: Path) -> bytes | None:
        # Each snapshot's objects are read where its store is.
        return (read_a if a.store and path.is_relative_to(a.store) else read_b)(path)

    code, note = code_changes(a, b, read)
    settings, topology = settings_and_topology(a, b)
    profile = list(difflib.unified_diff(
        (a.profile or "").splitlines(keepends=True), (b.profile or "").splitlines(keepends=True),
        f"a/{rundir.PROFILE}", f"b/{rundir.PROFILE}"))
    return Comparison(a.job_id, b.job_id, code, note, settings, topology,
                      environment_changes(a, b), profile)

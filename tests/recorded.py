"""Recorded output and its provenance: each set's MANIFEST.json, written by the record scripts,
checked by the tests, and the replay rule that keeps a recording true to what the client asks.

A manifest maps every file of its folder (paths relative to it) to where the file came from:
the command line, the program and its version, the machine, the date, and for text quoted from
a publication its address. A SLURM set lives in `recorded/slurm-<major>.<minor>/`, named for
the SLURM that produced it, so that sets of other versions can sit beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import Result
from hpctrain.slurm.transport import LocalTransport
from hpctrain.slurm.versions import dialect_for

MANIFEST = "MANIFEST.json"
TESTS = Path(__file__).resolve().parent
# Every folder of recorded output; each file under one is listed in a manifest beneath it.
RECORDED_DIRS = tuple(TESTS / d / "recorded" for d in ("jobs", "alternatives", "profiles",
                                                       "monitor", "diagnosis"))
# The SLURM the checked-in sets come from: Debian bookworm's slurm-wlm 22.05.8.
SLURM = "slurm-22.05"
REQUIRED = ("command", "program", "machine", "date")
# Files that belong to a recorded folder without being recorded output.
_NOT_RECORDINGS = {MANIFEST, "README.md"}
# A job id, an array task or a comma-separated list of them, as tests substitute them.
_IDS = re.compile(r"\d+(?:_\d+)?(?:,\d+(?:_\d+)?)*")


class UnrecordedCommandError(AssertionError):
    """A replayed SLURM command was asked with a command line no recording answers."""


# --- reading and checking manifests -----------------------------------------------------------


def load_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """File (relative to `folder`) -> its provenance."""
    files: dict[str, dict[str, Any]] = json.loads((folder / MANIFEST).read_text())["files"]
    return files


def recorded_files(folder: Path) -> list[str]:
    """Every file of recorded output under `folder`, relative to it (scripts and notes aside)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.name not in _NOT_RECORDINGS and p.suffix != ".py"
                  and "__pycache__" not in p.parts)


def manifest_folders(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob(MANIFEST))


def manifest_problems(root: Path) -> list[str]:
    """What keeps `root`'s recordings from naming their provenance; [] when all is said."""
    problems = []
    covered: set[Path] = set()
    for folder in manifest_folders(root):
        entries = load_manifest(folder)
        on_disk = recorded_files(folder)
        covered.update(folder / f for f in on_disk)
        problems += [f"{folder / f}: not in {MANIFEST}" for f in on_disk if f not in entries]
        problems += [f"{folder / f}: listed in {MANIFEST} but missing"
                     for f in entries if not (folder / f).is_file()]
        for name, entry in entries.items():
            problems += [f"{folder / name}: {MANIFEST} gives no {k}"
                         for k in REQUIRED if not entry.get(k)]
            problems += _argv_problems(folder / name, entry)
    problems += [f"{p}: no {MANIFEST} above it" for p in (root.rglob("*")) if p.is_file()
                 and p.name not in _NOT_RECORDINGS and p.suffix != ".py"
                 and "__pycache__" not in p.parts and p not in covered]
    return problems


def _argv_problems(path: Path, entry: dict[str, Any]) -> list[str]:
    """A JSON recording holds its argv; the manifest must name the same command."""
    if path.suffix != ".json" or not path.is_file():
        return []
    argv = json.loads(path.read_text()).get("argv")
    if argv is None or entry.get("command") == shlex.join(argv):
        return []
    return [f"{path}: {MANIFEST} names `{entry.get('command')}`, the file `{shlex.join(argv)}`"]


# --- replaying ------------------------------------------------------------------------------


def command_shape(argv: Sequence[str]) -> tuple[str, ...]:
    """The part of a command line its answer depends on, with job ids as `<ids>`.

    For sbatch that is the mode (`--parsable`, `--test-only`): the job's options and script are
    each test's own request, and sbatch answers every request in one form.
    """
    if argv and argv[0] == "sbatch":
        return tuple(argv[:2])
    shape: list[str] = []
    for arg in argv:
        if _IDS.fullmatch(arg):
            if shape and shape[-1] == "<ids>":
                continue  # `scancel 4 5 6` answers as `scancel 4` does
            arg = "<ids>"
        shape.append(arg)
    return tuple(shape)


def check_replay(asked: Sequence[str], recording: Result) -> None:
    """Refuse to answer `asked` with a recording of another command line."""
    if command_shape(asked) != command_shape(recording.argv):
        raise UnrecordedCommandError(
            f"no recording answers `{shlex.join(asked)}`: the one given was recorded for "
            f"`{shlex.join(recording.argv)}`. The client's command line and the recorded one "
            "differ (job ids aside); re-record the set with its record.py, or fix the client")


def pick_recording(asked: Sequence[str], recordings: Sequence[Result]) -> Result:
    """The one of several recordings of a program that was recorded for `asked`."""
    for res in recordings:
        if command_shape(res.argv) == command_shape(asked):
            return res
    recorded = "; ".join(f"`{shlex.join(r.argv)}`" for r in recordings)
    raise UnrecordedCommandError(
        f"no recording answers `{shlex.join(asked)}`; those given were recorded for {recorded}")


# --- recording --------------------------------------------------------------------------------


def slurm_set(base: Path, version: str) -> Path:
    """`base/slurm-22.05` for SLURM 22.05.8: one folder per SLURM release that produced it."""
    major, minor = version.split(".")[:2]
    return base / f"slurm-{major}.{minor}"


def machine_of(cluster: str | None, profile: str) -> str:
    """This dev cluster and the system it runs on, in words."""
    release = _os_release().get("PRETTY_NAME", platform.platform())
    return (f"hpctrain dev cluster `{cluster}` (hpctrain devcluster up, profile {profile}) "
            f"on {release}, host {platform.node()}")


def _os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    return {k: v.strip('"') for k, _, v in (ln.partition("=") for ln in text.splitlines()) if v}


class Recorder:
    """Writes recordings into one folder and the manifest entry of each as it goes."""

    def __init__(self, folder: Path, *, slurm_version: str, machine: str) -> None:
        self.folder = folder
        self.slurm_version = slurm_version
        self.machine = machine
        self.date = datetime.date.today().isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / MANIFEST
        self.entries = load_manifest(folder) if path.is_file() else {}

    def save(self, name: str, res: Result, *, stdin: str | None = None, how: str = "") -> None:
        """`name`.json with the command's argv, exit status and output, and its provenance."""
        data = {"argv": list(res.argv), "returncode": res.returncode, "stdout": res.stdout,
                "stderr": res.stderr}
        path = self.folder / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
        entry = {"command": shlex.join(res.argv),
                 "program": f"{res.argv[0]} (slurm {self.slurm_version})",
                 "machine": self.machine, "date": self.date}
        if stdin is not None:
            entry["stdin"] = stdin
        if how:
            entry["how"] = how
        self.entries[str(path.relative_to(self.folder))] = entry
        self.write()

    def note(self, name: str, entry: dict[str, str]) -> None:
        """A file the script writes itself (its provenance given whole)."""
        self.entries[name] = entry
        self.write()

    def write(self) -> None:
        text = json.dumps({"files": dict(sorted(self.entries.items()))}, indent=2)
        (self.folder / MANIFEST).write_text(text + "\n")


class RecordingClient(SlurmClient):
    """The real SLURM client; each call made under `saving(name)` is recorded as `name`.

    The record scripts go through the client's own methods, so a recording holds exactly the
    command line the client builds.
    """

    def __init__(self, recorder: Recorder, slurm_conf: str | None, timeout_s: float = 30,
                 transport: LocalTransport | None = None, text: bool = False) -> None:
        super().__init__(transport or LocalTransport(slurm_conf), timeout_s=timeout_s)
        self.slurm_conf = slurm_conf
        self.recorder = recorder
        self._name: str | None = None
        self._how = ""
        # Learnt now, so that its `sinfo --version` is not what the first `saving` records;
        # `text` records the text forms where this SLURM would answer in JSON.
        self._dialect = dialect_for(self.dialect().version,
                                    {"HPCTRAIN_SLURM_JSON": "0"} if text else os.environ)

    def saving(self, name: str, how: str = "") -> _Saving:
        return _Saving(self, name, how)

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout_s: float | None = None, check: bool = True,
            cwd: str | Path | None = None) -> Result:
        res = super().run(argv, input=input, timeout_s=timeout_s, check=False, cwd=cwd)
        if self._name is not None:
            self.recorder.save(self._name, res, stdin=input, how=self._how)
            self._name = None
        if check and res.returncode != 0:
            raise self.error_for(res)
        return res


class _Saving:
    def __init__(self, client: RecordingClient, name: str, how: str) -> None:
        self.client, self.name, self.how = client, name, how

    def __enter__(self) -> None:
        self.client._name, self.client._how = self.name, self.how

    def __exit__(self, *exc: object) -> None:
        leftover = self.client._name
        self.client._name = None
        if leftover is not None and exc[0] is None:
            raise RuntimeError(f"{leftover}: the client ran no command to record")


def slurm_version(client: SlurmClient) -> str:
    """The full version of the SLURM commands the client runs (`sinfo --version`)."""
    return client.run(["sinfo", "--version"]).stdout.split()[-1]


def parse_args(doc: str, argv: Sequence[str] | None = None, *, profile: bool = False,
               scenarios: Sequence[str] = ()) -> argparse.Namespace:
    """The record scripts' options: which SLURM to record, for profiles which profile, and
    which of a script's `scenarios` (the first by default)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if scenarios:
        parser.add_argument("scenario", nargs="?", choices=scenarios, default=scenarios[0],
                            help=f"what to record (default: {scenarios[0]})")
    parser.add_argument("--slurm-bin", type=Path, default=None,
                        help="directory of the SLURM commands to record (default: those on "
                             "PATH); the set goes to recorded/slurm-<their version>/")
    if profile:
        parser.add_argument("profile", help="the profile the running dev cluster emulates")
    args = parser.parse_args(argv)
    if args.slurm_bin is not None:
        os.environ["PATH"] = f"{args.slurm_bin.resolve()}{os.pathsep}{os.environ['PATH']}"
    return args

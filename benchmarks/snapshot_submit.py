"""What code snapshots cost a submit: a 5,000-file git project, side by side in one run.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
The same `hpctrain submit --profile local --sbatch-arg=--hold -- true` (held, then cancelled:
the cluster does no work) as a whole process, in two phases of alternating pairs, each with its
own baseline (`--no-snapshot`, a submit without snapshots):
- unchanged: the project submitted again as it is (the second and later submits);
- one edit: one file of the project changed before each submit (one file stored, a new tree).
Also counts the files the store gains per submit. Target (issue 27): an unchanged project adds
no file to the store and costs at most 50 ms more than the baseline.

    python benchmarks/snapshot_submit.py [--files 5000] [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpctrain.slurm.client import SlurmClient

TARGET_MS = 50.0


def _project(root: Path, files: int) -> None:
    """A git project of `files` small files (about a source tree's sizes) in 50 packages."""
    for i in range(files):
        pkg = root / f"pkg{i % 50}"
        pkg.mkdir(exist_ok=True)
        (pkg / f"mod{i}.py").write_text(f"VALUE_{i} = {i}\n" + "# " + "x" * (i % 2000) + "\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("hpctrain-runs/\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b",
                    "commit", "-q", "-m", "project"], check=True)


def _submit(env: dict[str, str], cwd: Path, *extra: str) -> tuple[float, dict[str, object]]:
    args = ["submit", "--profile", "local", "--time", "1", "--json", "--sbatch-arg=--hold",
            *extra, "--", "true"]
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "hpctrain", *args], env=env, cwd=cwd,
                         capture_output=True, text=True, check=False, timeout=300)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"hpctrain {' '.join(args)} failed:\n{res.stderr}")
    return took, dict(json.loads(res.stdout))


def _objects(store: Path) -> int:
    return sum(1 for _ in store.glob("objects/*/*"))


def _phase(env: dict[str, str], root: Path, store: Path, name: str, rounds: int,
           ids: list[str]) -> dict[str, list[float]]:
    """`rounds` pairs of a baseline submit and a `name` submit, the order alternating."""
    # Out of the racy window (2 s) of the last write, as a project one goes back to is.
    time.sleep(2.5)
    t: dict[str, list[float]] = {"baseline": [], name: [], "added": []}
    for r in range(rounds):
        for which in (("baseline", name) if r % 2 == 0 else (name, "baseline")):
            if which == "one edit":
                (root / "pkg0" / "mod0.py").write_text(f"VALUE_0 = {r}\n")
            before = _objects(store)
            took, done = _submit(env, root, *(("--no-snapshot",) if which == "baseline"
                                             else ()))
            t[which].append(took)
            ids.append(str(done["job_id"]))
            if which != "baseline":
                t["added"].append(_objects(store) - before)
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    client = SlurmClient.from_environment()
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "project", Path(tmp) / "home"
        root.mkdir()
        _project(root, a.files)
        env = {**os.environ, "HPCTRAIN_HOME": str(home)}
        if client.transport.conf_path():
            env["SLURM_CONF"] = str(client.transport.conf_path())
        # Bytecode compiled, as a pip install leaves it, and the first snapshot made.
        subprocess.run([sys.executable, "-m", "compileall", "-q",
                        str(Path(__file__).resolve().parents[1] / "hpctrain")], check=False)
        first_s, first = _submit(env, root)
        store = Path(str(first["snapshot"]["store"]))  # type: ignore[index]
        ids = [str(first["job_id"])]
        # Two phases, each against its own baseline in alternating order: the same project
        # submitted again and again, then one file edited before each submit.
        times = {name: _phase(env, root, store, name, a.rounds, ids)
                 for name in ("unchanged", "one edit")}
        client.run(["scancel", *ids], check=False)
    result = {
        "files": a.files, "rounds": a.rounds, "first_snapshot_s": round(first_s, 3),
        "median_ms": {name: {k: round(statistics.median(v) * 1000, 1) for k, v in t.items()
                             if k != "added"} for name, t in times.items()},
        "extra_ms": {name: round((statistics.median(t[name]) - statistics.median(t["baseline"]))
                                 * 1000, 1) for name, t in times.items()},
        "files_added_per_submit": {name: sorted(set(t["added"])) for name, t in times.items()},
        "target": f"unchanged adds no file, at most {TARGET_MS:g} ms more",
    }
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    ok = (result["extra_ms"]["unchanged"] <= TARGET_MS  # type: ignore[index]
          and set(times["unchanged"]["added"]) == {0})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Submitting a 5,000-point sweep, side by side with the plain baseline, in one run.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME),
whose MaxArraySize is SLURM's default, 1001. A trivial command (`true`) at every point, held
behind a %4 throttle; each sweep is cancelled as soon as it is measured (nothing runs long).

- `hpctrain sweep --samples 5000 -- true`: its wall time (points checked, 5,000 run
  directories and history rows written, the arrays queued) and its sbatch calls (`--debug`);
- the baseline: plain `sbatch --array` of the same arrays (what SLURM itself costs), and
  `hpctrain submit` of one point, times 5,000 (what one job per point would cost; measured on
  `--single` submits and multiplied, 5,000 real submits would take the better part of an hour).
- `hpctrain status` with the sweep in the history: its wall time and SLURM calls.

Targets: at most a few seconds and a handful of sbatch calls for the sweep; status at most 2
SLURM calls.

    python benchmarks/sweep_submit.py [--points 5000] [--single 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import resolve_slurm_conf

TARGET_S = 5.0
TARGET_SBATCH = 6


Done = subprocess.CompletedProcess[str]


def _run(env: dict[str, str], cwd: Path, *args: str) -> tuple[float, Done]:
    t0 = time.perf_counter()
    res = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True,
                         check=False, timeout=900)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(args[:6])} ... failed:\n{res.stderr[-2000:]}")
    return took, res


def _hpctrain(env: dict[str, str], cwd: Path, *args: str) -> tuple[float, Done]:
    return _run(env, cwd, sys.executable, "-m", "hpctrain", *args)


def _calls(stderr: str, command: str) -> int:
    return len(re.findall(rf"debug: hpctrain\.slurm: {command} ", stderr))


def _drained(env: dict[str, str], cwd: Path) -> None:
    """Until the controller holds no job records: 5,000 cancelled tasks are 5,000 records
    until MinJobAge passes, and count against MaxJobCount (10,000 by default), which would
    make the next sbatch wait."""
    deadline = time.monotonic() + 600
    while _run(env, cwd, "scontrol", "--oneliner", "show", "jobs")[1].stdout.count("JobId=") > 5:
        if time.monotonic() > deadline:
            raise SystemExit("the controller kept its job records for 600 s")
        time.sleep(5)


def _sweep(env: dict[str, str], cwd: Path, points: int) -> dict[str, object]:
    took, res = _hpctrain(env, cwd, "--debug", "sweep", "--profile", "local", "--time", "1",
                          "--no-monitor", "--sample", "k=int:0,1000000", "--samples",
                          str(points), "--max-parallel", "4", "--name", "bench", "--json",
                          "--", "true")
    done = json.loads(res.stdout)
    status_s, status = _hpctrain(env, cwd, "--debug", "status")
    calls = [c for c in ("squeue", "sacct", "scontrol") if _calls(status.stderr, c)]
    _hpctrain(env, cwd, "cancel", "--study", "bench")
    _drained(env, cwd)
    return {"sweep_s": round(took, 2), "sbatch_calls": _calls(res.stderr, "sbatch"),
            "arrays": len(done["arrays"]), "status_s": round(status_s, 2),
            "status_slurm_calls": sum(_calls(status.stderr, c) for c in calls)}


def _plain_sbatch(env: dict[str, str], cwd: Path, points: int, max_array: int) -> float:
    script = cwd / "plain.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=1\n#SBATCH --output=/dev/null\ntrue\n")
    ids, t0 = [], time.perf_counter()
    for start in range(0, points, max_array):
        size = min(max_array, points - start)
        _took, res = _run(env, cwd, "sbatch", "--parsable", f"--array=0-{size - 1}%4",
                          str(script))
        ids.append(res.stdout.strip().split(";")[0])
    took = time.perf_counter() - t0
    _run(env, cwd, "scancel", *ids)
    _drained(env, cwd)
    return took


def _single_submits(env: dict[str, str], cwd: Path, count: int) -> float:
    times, ids = [], []
    for _ in range(count):
        took, res = _hpctrain(env, cwd, "submit", "--profile", "local", "--time", "1",
                              "--no-monitor", "--json", "--", "true", "k=1")
        times.append(took)
        ids.append(str(json.loads(res.stdout)["job_id"]))
    _hpctrain(env, cwd, "cancel", *ids)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=5000)
    parser.add_argument("--single", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conf = resolve_slurm_conf()
    if conf is None:
        raise SystemExit("no dev cluster: run `hpctrain devcluster up` (or set SLURM_CONF)")
    client = SlurmClient.local(conf)
    max_array = int(client.config().get("MaxArraySize") or 1001)
    with tempfile.TemporaryDirectory(prefix="hpctrain-sweep-bench-") as tmp:
        cwd = Path(tmp)
        env = {**os.environ, "SLURM_CONF": conf, "HPCTRAIN_HOME": str(cwd / "home")}
        _drained(env, cwd)
        plain_s = _plain_sbatch(env, cwd, args.points, max_array)
        swept = _sweep(env, cwd, args.points)
        single_s = _single_submits(env, cwd, args.single)
    result = {"points": args.points, "max_array_size": max_array, **swept,
              "plain_sbatch_arrays_s": round(plain_s, 2),
              "one_submit_s": round(single_s, 3),
              "one_submit_per_point_s": round(single_s * args.points, 1),
              "met": swept["sweep_s"] <= TARGET_S and swept["sbatch_calls"] <= TARGET_SBATCH
              and swept["status_slurm_calls"] <= 2}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.points} points, MaxArraySize {max_array}:")
    print(f"  hpctrain sweep          {swept['sweep_s']:>8.2f} s  {swept['sbatch_calls']} sbatch "
          f"({swept['arrays']} arrays)  target {TARGET_S:g} s, {TARGET_SBATCH} sbatch")
    print(f"  plain sbatch --array    {plain_s:>8.2f} s  (SLURM's own cost)")
    print(f"  hpctrain submit x{args.points}  {single_s * args.points:>8.1f} s  "
          f"({single_s:.3f} s each, median of {args.single})")
    print(f"  hpctrain status         {swept['status_s']:>8.2f} s  "
          f"{swept['status_slurm_calls']} SLURM calls (target 2)")
    print("met" if result["met"] else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

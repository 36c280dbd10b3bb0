"""The start-up a container adds to each rank, on the idle dev cluster (issue 56: at most 1 s).

Each round submits the packaged trainer's 2-node job twice, with `--container` (Charliecloud, the
image of scripts/container-image.sh) and without, one epoch each, and reads every rank's
start-up timeline (`status JOB --json`): the seconds from the batch script's "ranks launched" to
the rank's "process started" (ch-run's work lies between) and to its "imports done". The
difference of the medians is what the container adds. Run it with the environment of the dev
cluster it measures (HPCTRAIN_HOME, HPCTRAIN_DEVCLUSTER_PORT_OFFSET) after `devcluster up`.

    python benchmarks/container_startup.py [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_S = 1.0
REPO = Path(__file__).resolve().parents[1]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _hpctrain(work: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], capture_output=True,
                          text=True, cwd=work, check=True, timeout=120).stdout


def _job(work: Path, job_id: str) -> dict[str, Any]:
    return dict(json.loads(_hpctrain(work, "status", job_id, "--json"))["jobs"][0])


def one_job(work: Path, container: str | None) -> dict[str, float]:
    """Each rank's seconds from "ranks launched" to its first marks, as medians over ranks."""
    extra = ("--container", container) if container else ()
    sub = json.loads(_hpctrain(work, "submit", "--profile", "local", "--nodes", "2",
                               "--max-epochs", "1", "--json", *extra))
    job_id = str(sub["job_id"])
    deadline = time.monotonic() + 300
    while (job := _job(work, job_id))["state"] not in TERMINAL:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not end in 300 s")
        time.sleep(1)
    if job["state"] != "COMPLETED":
        raise SystemExit(f"job {job_id} ended {job['state']}: see {sub['stdout']}")
    tracks = job["startup"]["tracks"]
    batch = next(t for t in tracks if t["rank"] is None)
    launched = next(m["at_s"] for m in batch["marks"] if m["mark"] == "ranks launched")
    ranks = [{m["mark"]: m["at_s"] for m in t["marks"]} for t in tracks if t["rank"] is not None]
    return {"started_s": statistics.median(r["process started"] - launched for r in ranks),
            "imported_s": statistics.median(r["imports done"] - launched for r in ranks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    image = subprocess.run(["bash", str(REPO / "scripts" / "container-image.sh")],
                           capture_output=True, text=True, check=True).stdout.split()[-1]
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "container": []}
    with tempfile.TemporaryDirectory(prefix="hpctrain-bench-container-") as tmp:
        for _ in range(args.rounds):
            runs["plain"].append(one_job(Path(tmp), None))
            runs["container"].append(one_job(Path(tmp), image))
    median = {kind: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
              for kind, rs in runs.items()}
    added = median["container"]["started_s"] - median["plain"]["started_s"]
    out = {"rounds": args.rounds, "runs": runs, "median": median,
           "added_per_rank_s": round(added, 3), "target_s": TARGET_S, "met": added <= TARGET_S}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"ranks launched -> process started, median: {median['plain']['started_s']:.2f} s "
              f"without, {median['container']['started_s']:.2f} s in the container; added "
              f"{added:.2f} s per rank (target {TARGET_S} s: {'met' if out['met'] else 'MISSED'})")


if __name__ == "__main__":
    main()

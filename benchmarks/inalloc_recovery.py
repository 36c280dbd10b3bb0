"""Recovery inside the allocation (issue 54), on the dev cluster (`hpctrain devcluster up`).

A 2-node x 2-rank packaged training (spiral, seeded) is killed at a random step: one random rank
gets SIGKILL. Each trial is seeded (the step, the rank), and checks what the issue asks:
- the run finishes in the same job id (SLURM's restart count 0: no requeue), COMPLETED;
- every epoch is recorded once in metrics.json;
- the final metrics equal an uninterrupted run's with the same seed (rel 1e-4);
- the time from the kill to the next training step (the first progress report of a rank
  started after the kill, polled every 0.05 s).
Beside it, the same kill recovered through the queue (`--restarts 0`, then `scontrol requeue`
of the job, as SLURM's requeue of a failed node's job does): kill to next step.

    python benchmarks/inalloc_recovery.py [--trials 20] [--requeue-trials 3] [--json]

Run it with the hpctrain environment of the dev cluster it should use (HPCTRAIN_HOME, and
HPCTRAIN_DEVCLUSTER_PORT_OFFSET for a second one). tests/supervisor/test_restarts_cluster.py
runs three of its trials.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpctrain.values.attempts import parse_attempts
from hpctrain.values.rundir import RunDir

HPCTRAIN = [sys.executable, "-m", "hpctrain"]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
EPOCHS = 24
# 16384 samples in batches of 256 on 4 ranks: 16 steps an epoch. Kills land in epochs 2 to 12.
CONFIG = (f"task: spiral\nseed: 7\ntrainer: {{max_epochs: {EPOCHS}, batch_size: 256}}\n"
          "data: {samples: 16384}\n")
KILL_STEPS = (20, 190)
SHAPE = ("--profile", "local", "--nodes", "2", "--gpus-per-node", "2", "--time", "10")
TARGET_S = 20.0
TOLERANCE = 1e-4


@dataclass
class Trial:
    """One seeded kill and what followed."""

    seed: int
    job: str
    victim_rank: int
    kill_step: int
    state: str
    same_job: bool
    attempts: int
    epochs_once: bool
    metrics_equal: bool | None
    kill_to_next_step_s: float | None


def submit(cwd: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([*HPCTRAIN, "submit", *SHAPE, "--config", "run.yaml", "--json",
                           *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hpctrain submit {' '.join(args)}: {done.stderr}")
    job: dict[str, Any] = json.loads(done.stdout)
    return job


def status(job: str) -> dict[str, Any]:
    done = subprocess.run([*HPCTRAIN, "status", job, "--json"], capture_output=True,
                          text=True, check=False)
    rows = json.loads(done.stdout)["jobs"] if done.returncode == 0 else []
    return dict(rows[0]) if rows else {}


def wait_end(job: str, timeout_s: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = status(job)
        if str(row.get("state", "")).split()[:1] and row["state"].split()[0] in TERMINAL:
            return row
        time.sleep(1)
    raise SystemExit(f"job {job} not ended after {timeout_s:.0f} s")


def progress(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in RunDir(run_dir).progress_dir.glob("*.json"):
        try:
            rows.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return rows


def registered(run_dir: Path) -> dict[int, int]:
    """rank -> pid of the ranks the rank hook registered."""
    out = {}
    for path in RunDir(run_dir).ranks_dir.glob("*.json"):
        try:
            row = json.loads(path.read_text())
            out[int(row["rank"])] = int(row["pid"])
        except (OSError, ValueError, KeyError):
            continue
    return out


def kill_at(run_dir: Path, step: int, rank: int, timeout_s: float = 300) -> tuple[float, set[int]]:
    """SIGKILL `rank` once a rank reported `step`; the kill's time and the pids before it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if max((int(r["step"]) for r in progress(run_dir)), default=-1) >= step:
            pids = registered(run_dir)
            if rank in pids:
                os.kill(pids[rank], signal.SIGKILL)
                return time.time(), set(pids.values())
        time.sleep(0.02)
    raise SystemExit(f"{run_dir}: step {step} not reached in {timeout_s:.0f} s")


def next_step_after(run_dir: Path, killed_at: float, old: set[int],
                    timeout_s: float = 300) -> float | None:
    """Seconds from the kill to the first step of a rank started after it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = [float(r["t"]) for r in progress(run_dir)
                 if int(r.get("pid", 0)) not in old and float(r.get("t", 0)) > killed_at]
        if fresh:
            return round(min(fresh) - killed_at, 2)
        time.sleep(0.05)
    return None


def final_metrics(run_dir: Path) -> dict[str, Any]:
    data = json.loads(RunDir(run_dir).metrics.read_text())
    return {k: v for k, v in data.items() if k.startswith("final_") and isinstance(v, float)}


def close(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a) and a.keys() == b.keys() and all(
        abs(a[k] - b[k]) <= TOLERANCE * max(1.0, abs(b[k])) for k in a)


def trial(cwd: Path, seed: int, reference: dict[str, Any] | None) -> Trial:
    """One seeded kill recovered inside the job."""
    rng = random.Random(seed)
    step, rank = rng.randint(*KILL_STEPS), rng.randrange(4)
    job = submit(cwd)
    run_dir, job_id = Path(job["run_dir"]), str(job["job_id"])
    killed_at, old = kill_at(run_dir, step, rank)
    recovered = next_step_after(run_dir, killed_at, old)
    row = wait_end(job_id)
    metrics = json.loads(RunDir(run_dir).metrics.read_text())
    epochs = [e["epoch"] for e in metrics.get("epochs") or []]
    tried = [a for a in parse_attempts(RunDir(run_dir).attempts.read_text()) if a.job == job_id]
    return Trial(seed, job_id, rank, step, row["state"].split()[0],
                 all(a.requeue == 0 for a in tried), len(tried),
                 epochs == list(range(1, EPOCHS + 1)),
                 None if reference is None else close(final_metrics(run_dir), reference),
                 recovered)


def through_queue(cwd: Path, seed: int, env: dict[str, str]) -> float | None:
    """The same kill recovered through SLURM's queue: no restart inside, the job requeued."""
    rng = random.Random(seed)
    step, rank = rng.randint(*KILL_STEPS), rng.randrange(4)
    job = submit(cwd, "--restarts", "0")
    run_dir, job_id = Path(job["run_dir"]), str(job["job_id"])
    killed_at, old = kill_at(run_dir, step, rank)
    subprocess.run(["scontrol", "requeue", job_id], env=env, check=False, capture_output=True)
    recovered = next_step_after(run_dir, killed_at, old, timeout_s=600)
    wait_end(job_id)
    return recovered


def project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.yaml").write_text(CONFIG)
    return root


def reference_run(cwd: Path) -> dict[str, Any]:
    job = submit(cwd, "--restarts", "0")
    row = wait_end(str(job["job_id"]))
    if not row["state"].startswith("COMPLETED"):
        raise SystemExit(f"the uninterrupted run ended {row['state']}")
    return final_metrics(Path(job["run_dir"]))


def slurm_env() -> dict[str, str]:
    """SLURM_CONF of the dev cluster hpctrain uses, for `scontrol requeue`."""
    done = subprocess.run([*HPCTRAIN, "devcluster", "status", "--json"], capture_output=True,
                          text=True, check=False)
    conf = json.loads(done.stdout).get("slurm_conf") if done.returncode == 0 else None
    return dict(os.environ, **({"SLURM_CONF": conf} if conf else {}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--requeue-trials", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    cwd = project(Path(tempfile.mkdtemp(prefix="hpctrain-recovery-")))
    reference = reference_run(cwd)
    trials = [trial(cwd, args.seed + i, reference) for i in range(args.trials)]
    env = slurm_env()
    queued = [through_queue(cwd, args.seed + i, env) for i in range(args.requeue_trials)]
    times = [t.kill_to_next_step_s for t in trials if t.kill_to_next_step_s is not None]
    good = [t for t in trials if t.state == "COMPLETED" and t.same_job and t.epochs_once
            and t.metrics_equal and t.attempts == 2]
    queue_times = [q for q in queued if q is not None]
    result = {
        "trials": [asdict(t) for t in trials], "good": len(good), "of": len(trials),
        "median_kill_to_next_step_s": statistics.median(times) if times else None,
        "target_s": TARGET_S,
        "through_queue_kill_to_next_step_s": queued,
        "through_queue_median_s": statistics.median(queue_times) if queue_times else None,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for t in trials:
        print(f"seed {t.seed}: job {t.job} rank {t.victim_rank} killed at step {t.kill_step}: "
              f"{t.state}, attempts {t.attempts}, epochs once {t.epochs_once}, metrics equal "
              f"{t.metrics_equal}, next step after {t.kill_to_next_step_s} s")
    print(f"{len(good)} of {len(trials)} recovered in the job; median kill to next step "
          f"{result['median_kill_to_next_step_s']} s (target {TARGET_S} s); through the "
          f"queue: {result['through_queue_median_s']} s ({queued})")


if __name__ == "__main__":
    main()

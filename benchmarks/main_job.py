"""The main 2-node job against the same training written by hand as a tuned sbatch script.

On the dev cluster (`hpctrain devcluster up`, profile local: 2 nodes x 2 ranks), in rounds
that alternate the two so that machine noise hits both alike:

- hpctrain: `hpctrain submit --profile local --nodes 2` (the packaged trainer's spiral task at
  its defaults: what `scripts/demo.sh` submits), as a whole process;
- hpctrain per-node: the same with `--launcher per-node` (one import per node, the workers
  forked from it: hpctrain/trainer/workers.py);
- by hand: `sbatch` of a script a careful user would write (plain PyTorch DDP over gloo, srun,
  `OMP_NUM_THREADS=1`, MASTER_ADDR from the node list) training the same MLP on the same spiral
  data with the same optimizer, batch, epochs and validation each epoch, saving the model at
  the end, on the same allocation (nodes, tasks, CPUs and memory taken from hpctrain's own
  rendered script).

Each job is timed from the start of its submitting command to SLURM's COMPLETED (squeue polled
every 0.2 s); the job's own Start->End (sacct, whole seconds) is shown beside. Target
(issue 43): hpctrain's median at most 1.1x the script's.

    python benchmarks/main_job.py [--rounds 3] [--json]
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

TARGET = 1.1
HPCTRAIN = [sys.executable, "-m", "hpctrain"]
TOPOLOGY = ("--profile", "local", "--nodes", "2")

# The trainer's spiral defaults (hpctrain/tasks/spiral.py), written out as a script would.
TRAIN = r'''
import math, os, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", init_method="tcp://%s:%s" % (
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]), rank=rank, world_size=world)
samples, val_fraction, noise, turns, seed = 200000, 0.2, 0.02, 1.5, 42
g = torch.Generator().manual_seed(seed)
labels = torch.arange(samples) % 2
t = torch.rand(samples, generator=g).sqrt()
angle = t * turns * 2 * math.pi + labels * math.pi
x = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)
x += noise * torch.randn(samples, 2, generator=g)
order = torch.randperm(samples, generator=g)
x, y = x[order].float(), labels[order]
n_val = int(samples * val_fraction)
xv, yv = x[:n_val][rank::world], y[:n_val][rank::world]
xt, yt = x[n_val:][rank::world], y[n_val:][rank::world]
torch.manual_seed(seed)
layers, width = [], 2
for size in (64, 32, 16):
    layers += [torch.nn.Linear(width, size), torch.nn.ReLU()]
    width = size
model = DistributedDataParallel(torch.nn.Sequential(*layers, torch.nn.Linear(width, 2)))
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
batch = 8192
for epoch in range(20):
    perm = torch.randperm(len(xt), generator=torch.Generator().manual_seed(seed + epoch))
    model.train()
    for i in range(0, len(xt), batch):
        idx = perm[i:i + batch]
        loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        seen = torch.tensor([(model(xv).argmax(1) == yv).sum().item(), len(yv)])
    dist.all_reduce(seen)
if rank == 0:
    print("val_acc %.4f" % (seen[0].item() / seen[1].item()), flush=True)
    torch.save(model.module.state_dict(), os.path.join(os.environ["RUN_DIR"], "model.pt"))
dist.destroy_process_group()
'''

SCRIPT = """#!/bin/bash
#SBATCH --job-name=by-hand
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node={tasks}
#SBATCH --cpus-per-task={cpus}
#SBATCH --mem={mem}
#SBATCH --time=5
#SBATCH --output={work}/by-hand-%j.out
set -eo pipefail
export PATH={bin}:"$PATH"
export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
export MASTER_PORT="$((20000 + SLURM_JOB_ID % 12000))"
export OMP_NUM_THREADS=1 RUN_DIR={work}/run-"$SLURM_JOB_ID"
mkdir -p "$RUN_DIR"
srun python {work}/train.py
"""


def _allocation(env: dict[str, str]) -> dict[str, str]:
    """Nodes, tasks, CPUs and memory per node of hpctrain's script for the same topology."""
    text = subprocess.run([*HPCTRAIN, "render", *TOPOLOGY], env=env, check=True,
                          capture_output=True, text=True).stdout
    got = dict(re.findall(r"(?m)^#SBATCH --(nodes|ntasks-per-node|cpus-per-task|mem)=(\S+)$",
                          text))
    return {"nodes": got["nodes"], "tasks": got["ntasks-per-node"],
            "cpus": got["cpus-per-task"], "mem": got["mem"]}


def _slurm_conf(env: dict[str, str]) -> str:
    out = subprocess.run([*HPCTRAIN, "devcluster", "status", "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    conf = json.loads(out).get("slurm_conf")
    if not conf:
        raise SystemExit("the dev cluster is not up: run `hpctrain devcluster up` first")
    return str(conf)


def _until_done(job_id: str, env: dict[str, str]) -> str:
    """Poll squeue until the job has ended; its end state."""
    while True:
        out = subprocess.run(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"],
                             env=env, capture_output=True, text=True).stdout.split()
        if out and out[0] not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return out[0]
        time.sleep(0.2)


def _elapsed(job_id: str, env: dict[str, str]) -> float | None:
    """The job's Start->End in seconds, as sacct has it (whole seconds)."""
    for _ in range(50):
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "ElapsedRaw"],
                             env=env, capture_output=True, text=True).stdout.strip()
        if out.isdigit():
            return float(out)
        time.sleep(0.2)
    return None


def _hpctrain_job(env: dict[str, str], *more: str) -> tuple[float, str, str]:
    start = time.perf_counter()
    out = subprocess.run([*HPCTRAIN, "submit", *TOPOLOGY, "--job-name", "bench-main", *more,
                          "--json"], env=env, capture_output=True, text=True, check=True).stdout
    job_id = str(json.loads(out)["job_id"])
    state = _until_done(job_id, env)
    return time.perf_counter() - start, job_id, state


def _script_job(script: Path, env: dict[str, str]) -> tuple[float, str, str]:
    start = time.perf_counter()
    out = subprocess.run(["sbatch", "--parsable", str(script)], env=env, capture_output=True,
                         text=True, check=True).stdout
    job_id = out.strip().split(";")[0]
    state = _until_done(job_id, env)
    return time.perf_counter() - start, job_id, state


def measure(rounds: int) -> dict[str, list[dict[str, object]]]:
    env = dict(os.environ)
    env["SLURM_CONF"] = _slurm_conf(env)
    runs: dict[str, list[dict[str, object]]] = {"hpctrain": [], "hpctrain per-node": [],
                                                 "by hand": []}
    with tempfile.TemporaryDirectory(prefix="hpctrain-main-job-", dir=Path.cwd()) as work:
        (Path(work) / "train.py").write_text(TRAIN)
        script = Path(work) / "by-hand.sh"
        script.write_text(SCRIPT.format(work=work, bin=Path(sys.executable).parent,
                                        **_allocation(env)))
        for _ in range(rounds):
            for name in runs:
                wall, job_id, state = (
                    _hpctrain_job(env) if name == "hpctrain" else
                    _hpctrain_job(env, "--launcher", "per-node") if name == "hpctrain per-node"
                    else _script_job(script, env))
                runs[name].append({"job_id": job_id, "state": state, "wall_s": round(wall, 2),
                                   "elapsed_s": _elapsed(job_id, env)})
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = measure(args.rounds)
    medians = {name: statistics.median(float(str(r["wall_s"])) for r in rs)
               for name, rs in runs.items()}
    ratio = medians["hpctrain"] / medians["by hand"]
    per_node = medians["hpctrain per-node"] / medians["by hand"]
    failed = [r for rs in runs.values() for r in rs if r["state"] != "COMPLETED"]
    ok = ratio <= TARGET and not failed
    if args.json:
        print(json.dumps({"runs": runs, "median_s": medians, "ratio": round(ratio, 3),
                          "per_node_ratio": round(per_node, 3), "ok": ok}))
    else:
        for name, rs in runs.items():
            walls = ", ".join(f"{r['wall_s']:.1f}" for r in rs)
            elapsed = ", ".join(str(r["elapsed_s"]) for r in rs)
            print(f"{name:<17} median {medians[name]:5.1f} s  (rounds {walls}; "
                  f"in the job {elapsed} s)")
        note = f"; {len(failed)} job(s) did not complete" if failed else ""
        print(f"hpctrain / by hand: {ratio:.2f}x (target <= {TARGET}x){note} -> "
              f"{'OK' if ok else 'OVER'}; with --launcher per-node: {per_node:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

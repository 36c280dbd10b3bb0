"""One import per node against one per rank: what the packaged trainer's ranks would save.

A node's ranks each import what the trainer needs (torch, Lightning, hpctrain's trainer) as
`srun` starts them, all at once. The alternative weighed in issue 43: one process per node
imports it once, then forks the node's ranks (CUDA not yet started, so the children may start
it). Both are timed here, side by side in rotating rounds, from the start to the moment every
rank of the node has the imports done; whole-process CPU time beside.

    python benchmarks/node_imports.py [--ranks 4] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What a rank of the packaged trainer imports before its first step (hpctrain/trainer/runner.py).
IMPORTS = "import torch, lightning, hpctrain.trainer.runner"

# Each rank marks its imports done by creating a file; the parent forks the ranks in `fork`.
RANK = """
import os, sys
{imports}
open(os.path.join(sys.argv[1], "rank-" + sys.argv[2]), "w").close()
"""
FORKER = """
import os, sys
{imports}
import torch
assert not torch.cuda.is_initialized()  # a forked child could not start CUDA
children = []
for rank in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        open(os.path.join(sys.argv[1], "rank-%d" % rank), "w").close()
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def _until_all(marks: Path, ranks: int) -> None:
    while len(list(marks.iterdir())) < ranks:
        time.sleep(0.005)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def per_rank(ranks: int, env: dict[str, str]) -> tuple[float, float]:
    """srun's way: every rank a process of its own that imports everything."""
    with tempfile.TemporaryDirectory() as marks:
        cpu, start = _children_cpu(), time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", RANK.format(imports=IMPORTS), marks,
                                   str(r)], env=env) for r in range(ranks)]
        _until_all(Path(marks), ranks)
        wall = time.perf_counter() - start
        for p in procs:
            p.wait()
        return wall, _children_cpu() - cpu


def per_node(ranks: int, env: dict[str, str]) -> tuple[float, float]:
    """One import per node, then a fork per rank."""
    with tempfile.TemporaryDirectory() as marks:
        cpu, start = _children_cpu(), time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", FORKER.format(imports=IMPORTS), marks,
                                 str(ranks)], env=env)
        _until_all(Path(marks), ranks)
        wall = time.perf_counter() - start
        proc.wait()
        return wall, _children_cpu() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ways = {"per rank": per_rank, "per node": per_node}
    for way in ways.values():  # warm the page cache and the .pyc files
        way(1, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for i in range(args.rounds):
        order = list(ways) if i % 2 == 0 else list(reversed(ways))
        for name in order:
            samples[name].append(ways[name](args.ranks, env))
    result = {name: {"wall_s": round(statistics.median(w for w, _ in s), 2),
                     "cpu_s": round(statistics.median(c for _, c in s), 2)}
              for name, s in samples.items()}
    if args.json:
        print(json.dumps({"ranks": args.ranks, "rounds": args.rounds, "cpus": os.cpu_count(),
                          **result}))
    else:
        for name, r in result.items():
            print(f"{name:<9} {args.ranks} ranks' imports done in {r['wall_s']:5.2f} s "
                  f"(CPU {r['cpu_s']:5.2f} s)")
        print(f"{args.rounds} rounds, medians, on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

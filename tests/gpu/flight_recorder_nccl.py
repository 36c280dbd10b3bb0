"""The rank hook's flight record on GPUs, through NCCL: one prepared check for a GPU machine.

    PYTHONPATH=. python tests/gpu/flight_recorder_nccl.py

Needs torch with CUDA and one GPU or more; nothing of hpctrain beyond its standard-library
parts (the rank hook, monitor/collectives.py), so it runs in a plain ML environment. With two
GPUs or more: two NCCL ranks, rank 1 asleep before its fourth all_reduce while rank 0 waits in
it; the hook's records must say "rank 1 never entered all_reduce #4". With one GPU (NCCL
refuses two ranks on one device): one rank, whose record must hold its NCCL all_reduces.
Prints what it found; exits 0 when the records say so, 1 when not, 77 without a GPU.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from hpctrain.monitor import collectives  # noqa: E402
from hpctrain.rankhook import SITE_DIR  # noqa: E402
from hpctrain.values.rundir import RunDir  # noqa: E402

RANK = """
import os, time, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
x = torch.ones(1024, device="cuda")
for i in range(4):
    if rank == 1 and i == 3:
        time.sleep(600)
    dist.all_reduce(x)
torch.cuda.synchronize()  # rank 0 waits here for all_reduce #4
time.sleep(600)
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(run_dir: Path, world: int) -> list[subprocess.Popen[bytes]]:
    port, procs = _port(), []
    for rank in range(world):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "RANK": str(rank), "WORLD_SIZE": str(world), "HPCTRAIN_RUN_DIR": str(run_dir),
               "SLURMD_NODENAME": "gpunode",
               "PYTHONPATH": os.pathsep.join([SITE_DIR, str(REPO)])}
        procs.append(subprocess.Popen([sys.executable, "-c", RANK], env=env))
    return procs


def _records(run_dir: Path, world: int) -> dict[int, object]:
    """Ask every rank's hook for its record once the ranks are in place; their answers."""
    where = RunDir(run_dir)
    deadline = time.monotonic() + 120
    while len(list(where.ranks_dir.glob("*.json"))) < world:
        assert time.monotonic() < deadline, "the ranks never registered"
        time.sleep(0.5)
    time.sleep(15)  # the first three all_reduces, then the wait
    where.stall_dir.mkdir(parents=True, exist_ok=True)
    where.flight_request.write_text("gpu-check\n")
    found: dict[int, object] = {}
    while len(found) < world and time.monotonic() < deadline:
        time.sleep(0.5)
        for path in where.flight_dir.glob("*.json"):
            row = json.loads(path.read_text())
            found[int(row["rank"])] = row["trace"]
    return found


def main() -> int:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not gpus:
        print("no GPU: nothing checked")
        return 77
    world = min(2, gpus)
    with tempfile.TemporaryDirectory() as tmp:
        procs = _start(Path(tmp), world)
        try:
            records = _records(Path(tmp), world)
        finally:
            for p in procs:
                p.kill()
    view = collectives.read(records, list(range(world)))  # type: ignore[arg-type]
    ops = {e.op for e in view.last.values()}
    print(f"torch {torch.__version__}, {gpus} GPU(s), {world} rank(s): {view.describe()}; "
          f"ops {sorted(ops)}")
    if world == 2:
        ok = "rank 1 never entered all_reduce #4" in view.describe()
    else:
        ok = bool(view.last) and all(op.startswith("nccl:") for op in ops)
    print("flight records through the rank hook:", "as expected" if ok else "NOT as expected")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

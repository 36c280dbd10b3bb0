"""Record the SLURM answers the start-time parsers are tested on (run on the dev cluster).

flock /work/notes/devcluster.lock .venv/bin/python tests/alternatives/recorded/record.py
With one GPU busy on each of the two `local` nodes: `sbatch --test-only` for a 1x2 job (must
wait) and a 2x1 job (starts now), and the state listing's squeue (with its expected-start
field) for the busy job and a pending 1x2 job, before and after the backfill pass.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from hpctrain.slurm.client import _squeue_argv

HERE = Path(__file__).resolve().parent
JOB = "#!/bin/bash\n#SBATCH --nodes={n}\n#SBATCH --gres=gpu:emu:{g}\n#SBATCH --time=5\n" \
      "#SBATCH --ntasks-per-node=1\n#SBATCH --mem=500\n#SBATCH --output=/dev/null\nsleep {s}\n"


def run(name: str, argv: list[str], stdin: str | None = None) -> str:
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    (HERE / f"{name}.json").write_text(json.dumps(
        {"argv": argv, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr},
        indent=2) + "\n")
    return p.stdout


def main() -> None:
    run("test_only_idle", ["sbatch", "--test-only"], JOB.format(n=2, g=1, s=1))
    busy = run("sbatch_busy", ["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1",
                               "--gres=gpu:emu:1", "--mem=500", "--time=3",
                               "--output=/dev/null", "--wrap", "sleep 120"]).strip()
    time.sleep(3)
    run("test_only_wait", ["sbatch", "--test-only"], JOB.format(n=1, g=2, s=1))
    run("test_only_now", ["sbatch", "--test-only"], JOB.format(n=2, g=1, s=1))
    run("test_only_refused", ["sbatch", "--test-only"], JOB.format(n=9, g=1, s=1))
    pending = run("sbatch_pending", ["sbatch", "--parsable"], JOB.format(n=1, g=2, s=1)).strip()
    time.sleep(2)
    # Before the backfill pass (every 30 s by default) SLURM has no estimate yet: N/A.
    run("squeue_starts_unknown", list(_squeue_argv([busy, pending])))
    time.sleep(35)
    run("squeue_starts", list(_squeue_argv([busy, pending])))
    subprocess.run(["scancel", busy, pending], check=False)


if __name__ == "__main__":
    main()

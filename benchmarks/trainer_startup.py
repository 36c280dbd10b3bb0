"""Trainer start-up: process start to the first training step, and what the imports cost.

Runs `python -X importtime -m hpctrain.trainer` (a one-epoch spiral run) a few times and reports
the median of the trainer's own start-up figures (`startup_s`, `startup_imports_s` in
metrics.json) and of the import time by top-level package: every module's own ("self") import
time summed under its package, so that torch's cost is not counted again under Lightning's.

    python benchmarks/trainer_startup.py --runs 3
    python benchmarks/trainer_startup.py --import-only lightning   # Lightning's own import cost
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

RUN = ["--task", "spiral", "--max-epochs", "1", "--set", "data.samples=2048",
       "--set", "logging.progress=lines", "--set", "checkpoint.enabled=false"]
# Packages shown by name; everything else is summed as "other".
SHOWN = ("torch", "lightning", "torchmetrics", "matplotlib", "sympy", "numpy",
         "lightning_utilities", "pydantic", "pydantic_core", "yaml", "hpctrain", "rich", "fsspec",
         "tensorboard", "tensorboardX", "torchvision")


def import_times(stderr: str) -> dict[str, float]:
    """Seconds of import time per top-level package from `-X importtime` output."""
    totals: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, self_us, _, name = (part.strip() for part in line.replace(":", "|", 1).split("|"))
        if not self_us.isdigit():
            continue  # the header line
        root = name.split(".")[0]
        totals[root if root in SHOWN else "other"] += int(self_us) / 1e6
    return dict(totals)


def one_run(tmp: Path, index: int) -> dict[str, Any]:
    """One trainer process under -X importtime: its start-up figures and import times."""
    run_dir = tmp / f"run-{index}"
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hpctrain.trainer", *RUN,
         "--run-dir", str(run_dir), "--resume", "never"],
        env=env, capture_output=True, text=True, check=True,
    )
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {
        "startup_s": metrics["startup_s"],
        "startup_imports_s": metrics["startup_imports_s"],
        "imports": import_times(done.stderr),
    }


def import_only(module: str) -> dict[str, Any]:
    """`python -X importtime -c 'import MODULE'`: the import alone, no trainer."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, check=True)
    times = import_times(done.stderr)
    return {"startup_s": sum(times.values()), "startup_imports_s": sum(times.values()),
            "imports": times}


def main(argv: list[str] | None = None) -> int:
    """Measure and print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--import-only", metavar="MODULE", help="only time `import MODULE`")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hpctrain-startup-") as name:
        if args.import_only:
            runs = [import_only(args.import_only) for _ in range(args.runs)]
        else:
            runs = [one_run(Path(name), i) for i in range(args.runs)]
    packages = sorted({k for r in runs for k in r["imports"]},
                      key=lambda k: -statistics.median(r["imports"].get(k, 0.0) for r in runs))
    result = {
        "runs": args.runs,
        "startup_s": statistics.median(r["startup_s"] for r in runs),
        "startup_imports_s": statistics.median(r["startup_imports_s"] for r in runs),
        "imports_s": {k: statistics.median(r["imports"].get(k, 0.0) for r in runs)
                      for k in packages},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if args.import_only:
        print(f"import {args.import_only}: {result['startup_s']:.2f} s median of {args.runs} "
              "(sum of the modules' own import times)")
    else:
        print(f"process start -> first training step: {result['startup_s']:.2f} s median of "
              f"{args.runs} (imports done at {result['startup_imports_s']:.2f} s)")
    print("import time by package (-X importtime, own time of each module):")
    for name, seconds in result["imports_s"].items():
        print(f"  {name:<22}{seconds * 1000:>8.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Median wall time of `hpctrain render` against the floor of importing its dependencies.

Both are measured side by side in one run, alternating, so machine noise hits both alike.
Target: render at most 1.5x the floor.

    python benchmarks/cli_latency.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

FLOOR = [sys.executable, "-c", "import typer, rich, pydantic, jinja2, yaml"]
RENDER = [
    sys.executable,
    "-m",
    "hpctrain",
    "render",
    "--profile",
    "raven",
    "--nodes",
    "2",
    "--dry-run",
]
TARGET = 1.5


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _time(FLOOR), _time(RENDER)  # warm the page cache and .pyc files
    floor, render = [], []
    for _ in range(args.runs):
        floor.append(_time(FLOOR))
        render.append(_time(RENDER))
    f, r = statistics.median(floor), statistics.median(render)
    result = {
        "floor_median_s": round(f, 4),
        "render_median_s": round(r, 4),
        "ratio": round(r / f, 3),
        "target": TARGET,
        "runs": args.runs,
        "ok": r / f <= TARGET,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"floor  (import typer, rich, pydantic, jinja2, yaml): {f * 1000:7.1f} ms")
        print(f"render (hpctrain render --profile raven --nodes 2):  {r * 1000:7.1f} ms")
        print(f"ratio {r / f:.2f} (target <= {TARGET}) -> {'OK' if result['ok'] else 'OVER'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

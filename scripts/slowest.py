"""The slowest test modules, wall time against CPU time, from the files HPCTRAIN_TEST_TIMES
wrote (tests/conftest.py; scripts/test.sh keeps them in .cache/test-logs/*.times.json).

    python3 scripts/slowest.py [-n 20] FILE [FILE...]

A module whose CPU is far below its wall waits (SLURM's scheduling, a job's run, a daemon's
start); one near its wall computes. Several files (the stages run side by side) are listed
apart, each row naming its file's stage.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def by_module(path: Path) -> dict[str, list[float]]:
    """module -> [wall s, CPU s, tests]."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for nodeid, t in json.loads(path.read_text()).items():
        row = sums[nodeid.split("::")[0]]
        row[0] += t["wall_s"]
        row[1] += t["cpu_s"]
        row[2] += 1
    return sums


def main(argv: list[str]) -> int:
    count = 20
    if argv[:1] == ["-n"]:
        count, argv = int(argv[1]), argv[2:]
    rows = []
    for name in argv:
        path = Path(name)
        stage = path.name.removesuffix(".times.json")
        rows += [(w, c, int(n), stage, m) for m, (w, c, n) in by_module(path).items()]
    if not rows:
        print("no test times found", file=sys.stderr)
        return 1
    rows.sort(reverse=True)
    print(f"\n{'wall':>7} {'CPU':>7} {'tests':>5}  {'stage':<14} module  ({count} slowest)")
    for wall, cpu, n, stage, module in rows[:count]:
        print(f"{wall:>6.0f}s {cpu:>6.0f}s {n:>5}  {stage:<14} {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

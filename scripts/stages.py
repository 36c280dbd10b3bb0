"""Run the stages of scripts/test.sh, timed, and print their table at the end.

    python3 scripts/stages.py begin                    # a new run: clears .cache/test-logs
    python3 scripts/stages.py run NAME -- CMD [ARG...]  # one stage; exits with CMD's status
    python3 scripts/stages.py table                    # every stage of this run, then the total

A stage's output goes to .cache/test-logs/NAME.log and to stdout, each line prefixed with
[NAME] so that stages running side by side stay readable. Its wall time and CPU time (user +
system of the command and every descendant it waited for) go to NAME.stage.json. CPU far below
wall
means the stage waited (for SLURM, for a job, for a daemon); the jobs that slurmd runs are not
the stage's descendants, so a cluster stage's CPU is the test process's own. Standard library
only: it runs before the venv exists.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

LOGS = Path(__file__).resolve().parents[1] / ".cache" / "test-logs"


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def begin() -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    for old in LOGS.iterdir():
        if old.is_file():
            old.unlink()
    (LOGS / "run.json").write_text(json.dumps({"start": time.time()}))
    return 0


def run(name: str, cmd: list[str]) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    start, cpu0 = time.time(), _children_cpu()
    with open(LOGS / f"{name}.log", "w", buffering=1, encoding="utf-8",
              errors="replace") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            log.write(line)
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()
        rc = proc.wait()
    record = {"name": name, "start": start, "wall_s": time.time() - start,
              "cpu_s": _children_cpu() - cpu0, "rc": rc}
    (LOGS / f"{name}.stage.json").write_text(json.dumps(record))
    return rc


def _records() -> list[dict[str, float | int | str]]:
    found = [json.loads(p.read_text()) for p in LOGS.glob("*.stage.json")]
    return sorted(found, key=lambda r: float(r["start"]))


def table() -> int:
    records = _records()
    try:
        began = float(json.loads((LOGS / "run.json").read_text())["start"])
    except (OSError, ValueError, KeyError):
        began = min((float(r["start"]) for r in records), default=time.time())
    print(f"\n{'stage':<16} {'starts at':>9} {'wall':>8} {'CPU':>8}  result")
    for r in records:
        result = "ok" if r["rc"] == 0 else f"exit {r['rc']}"
        print(f"{r['name']:<16} {float(r['start']) - began:>8.0f}s {float(r['wall_s']):>7.0f}s "
              f"{float(r['cpu_s']):>7.0f}s  {result}")
    total_cpu = sum(float(r["cpu_s"]) for r in records)
    print(f"{'total':<16} {'':>9} {time.time() - began:>7.0f}s {total_cpu:>7.0f}s  "
          f"(stages side by side overlap; logs in {LOGS})")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["begin"]:
        return begin()
    if argv[:1] == ["table"]:
        return table()
    if len(argv) >= 4 and argv[0] == "run" and argv[2] == "--":
        return run(argv[1], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))

"""How soon `hpctrain logs -f` prints a line after the job writes it, beside `tail -F`, in one run.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
A job writes a line with its own clock every 0.2 s for `--seconds`; `hpctrain logs -f JOB` and
`tail -F FILE` follow it at once, and each line's delay is the time the follower printed it
less the time in the line (one machine, one clock). Also counts `logs -f`'s SLURM calls.

Target: a line within about 20 ms (median) of its write, as `tail -F`; SLURM calls as before
(at most one every 5 s).

    python benchmarks/logs_follow.py [--seconds 20] [--json]
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
import threading
import time
from pathlib import Path

from hpctrain.slurm.client import resolve_slurm_conf

TARGET_MS = 20.0
LINE = re.compile(rb"^tick (\d+\.\d+)$")


def _reader(proc: subprocess.Popen[bytes], delays: list[float]) -> None:
    assert proc.stdout is not None
    for raw in iter(proc.stdout.readline, b""):
        seen = time.time()
        m = LINE.match(raw.strip())
        if m:
            delays.append(seen - float(m.group(1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conf = resolve_slurm_conf()
    if conf is None:
        raise SystemExit("no dev cluster: run `hpctrain devcluster up` (or set SLURM_CONF)")
    with tempfile.TemporaryDirectory(prefix="hpctrain-logs-bench-") as tmp:
        cwd = Path(tmp)
        env = {**os.environ, "SLURM_CONF": conf, "HPCTRAIN_HOME": str(cwd / "home")}
        script = (f"for i in $(seq {args.seconds * 5}); do echo \"tick $(date +%s.%N)\"; "
                  "sleep 0.2; done")
        done = json.loads(subprocess.run(
            [sys.executable, "-m", "hpctrain", "submit", "--profile", "local", "--time", "5",
             "--no-monitor", "--json", "--", "bash", "-c", script], env=env, cwd=cwd,
            capture_output=True, text=True, check=True).stdout)
        ours: list[float] = []
        tails: list[float] = []
        Path(done["stdout"]).touch()
        debug = (cwd / "debug.txt").open("wb")
        # stdout is read by a thread only; --debug's lines go to a file (communicate() would
        # read stdout too and take lines from the thread).
        procs = [subprocess.Popen([sys.executable, "-m", "hpctrain", "--debug", "logs", "-f",
                                   str(done["job_id"])], env=env, cwd=cwd,
                                  stdout=subprocess.PIPE, stderr=debug),
                 subprocess.Popen(["tail", "-F", "-n", "+1", done["stdout"]],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)]
        threads = [threading.Thread(target=_reader, args=(p, d))
                   for p, d in zip(procs, (ours, tails), strict=True)]
        for t in threads:
            t.start()
        procs[0].wait(timeout=args.seconds + 300)
        time.sleep(1)  # tail -F's last lines
        procs[1].terminate()
        for t in threads:
            t.join(10)
        debug.close()
        err = (cwd / "debug.txt").read_bytes()
    calls = len(re.findall(rb"debug: hpctrain\.slurm: (?:squeue|sacct|scontrol) ", err))

    def ms(values: list[float]) -> float:
        return round(1000 * statistics.median(values), 2) if values else float("nan")

    # The first lines were written before the followers started: only the live ones count.
    live_ours, live_tail = ours[5:], tails[5:]
    result = {"lines": len(ours), "logs_f_median_ms": ms(live_ours),
              "tail_F_median_ms": ms(live_tail),
              "logs_f_max_ms": round(1000 * max(live_ours), 1) if live_ours else None,
              "slurm_calls": calls, "met": ms(live_ours) <= TARGET_MS}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{len(ours)} lines: hpctrain logs -f {result['logs_f_median_ms']} ms median "
              f"(max {result['logs_f_max_ms']} ms), tail -F {result['tail_F_median_ms']} ms; "
              f"{calls} SLURM calls; target {TARGET_MS:g} ms: "
              f"{'met' if result['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How soon `hpctrain logs -f` prints a line after the job writes it, and returns after the
job's end, beside `tail -F`, in one run.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
A job writes a line with its own clock every 0.2 s for `--seconds`, then `end` with its clock
as its last act; `hpctrain logs -f JOB` and `tail -F FILE` follow it at once, and each line's
delay is the time the follower printed it less the time in the line (one machine, one clock).
The end: how long after the job's last line `logs -f` returned (its exit status too), and when
that line reached `tail -F`, which never returns by itself (it is stopped here). Also counts
`logs -f`'s SLURM calls. `--rounds N` repeats the job and reports the end's median.

Targets: a line within about 20 ms (median) of its write, as `tail -F`; `logs -f` returns
within 2 s of the job's end; SLURM asked at most once every 5 s while the job runs.

    python benchmarks/logs_follow.py [--seconds 20] [--rounds 1] [--json]
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
from dataclasses import dataclass
from pathlib import Path

from hpctrain.slurm.runner import resolve_slurm_conf

TARGET_MS = 20.0
TARGET_END_S = 2.0
LINE = re.compile(rb"^tick (\d+\.\d+)$")
END = re.compile(rb"^end (\d+\.\d+)$")


def _reader(proc: subprocess.Popen[bytes], delays: list[float], ends: list[float]) -> None:
    """Each tick's delay; `ends` gets the job's last line's own time and when it arrived."""
    assert proc.stdout is not None
    for raw in iter(proc.stdout.readline, b""):
        seen = time.time()
        m = LINE.match(raw.strip())
        if m:
            delays.append(seen - float(m.group(1)))
        elif e := END.match(raw.strip()):
            ends.extend((float(e.group(1)), seen))


@dataclass
class _Round:
    """One job: the live lines' delays, the end, logs -f's SLURM calls and exit status."""

    ours: list[float]
    tails: list[float]
    lines: int
    calls: int
    rc: int | None
    end_to_return_s: float
    end_to_tail_line_s: float


def _round(seconds: int, env: dict[str, str], cwd: Path) -> _Round:
    """One job followed by both; the lines' delays, the end, and logs -f's SLURM calls."""
    script = (f"for i in $(seq {seconds * 5}); do echo \"tick $(date +%s.%N)\"; "
              "sleep 0.2; done; echo \"end $(date +%s.%N)\"")
    done = json.loads(subprocess.run(
        [sys.executable, "-m", "hpctrain", "submit", "--profile", "local", "--time", "5",
         "--no-monitor", "--json", "--", "bash", "-c", script], env=env, cwd=cwd,
        capture_output=True, text=True, check=True).stdout)
    ours: list[float] = []
    tails: list[float] = []
    ends: tuple[list[float], list[float]] = ([], [])
    Path(done["stdout"]).touch()
    debug_path = cwd / f"debug-{done['job_id']}.txt"
    debug = debug_path.open("wb")
    # stdout is read by a thread only; --debug's lines go to a file (communicate() would
    # read stdout too and take lines from the thread).
    procs = [subprocess.Popen([sys.executable, "-m", "hpctrain", "--debug", "logs", "-f",
                               str(done["job_id"])], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=debug),
             subprocess.Popen(["tail", "-F", "-n", "+1", done["stdout"]],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)]
    threads = [threading.Thread(target=_reader, args=(p, d, e))
               for p, d, e in zip(procs, (ours, tails), ends, strict=True)]
    for t in threads:
        t.start()
    while procs[0].poll() is None:  # polled, so that its return is timed to a few ms
        time.sleep(0.005)
    returned = time.time()
    time.sleep(1)  # tail -F's last lines
    procs[1].terminate()
    for t in threads:
        t.join(10)
    debug.close()
    err = debug_path.read_bytes()
    calls = len(re.findall(rb"debug: hpctrain\.slurm: (?:squeue|sacct|scontrol) ", err))
    ended = ends[0][0] if ends[0] else float("nan")
    # The first lines were written before the followers started: only the live ones count.
    return _Round(ours[5:], tails[5:], len(ours), calls, procs[0].returncode,
                  returned - ended, (ends[1][1] - ended) if ends[1] else float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conf = resolve_slurm_conf()
    if conf is None:
        raise SystemExit("no dev cluster: run `hpctrain devcluster up` (or set SLURM_CONF)")
    with tempfile.TemporaryDirectory(prefix="hpctrain-logs-bench-") as tmp:
        cwd = Path(tmp)
        env = {**os.environ, "SLURM_CONF": conf, "HPCTRAIN_HOME": str(cwd / "home")}
        rounds = [_round(args.seconds, env, cwd) for _ in range(args.rounds)]

    def ms(values: list[float]) -> float:
        return round(1000 * statistics.median(values), 2) if values else float("nan")

    live_ours = [d for r in rounds for d in r.ours]
    live_tail = [d for r in rounds for d in r.tails]
    ends = [r.end_to_return_s for r in rounds]
    tail_ends = [r.end_to_tail_line_s for r in rounds]
    result = {"lines": sum(r.lines for r in rounds),
              "logs_f_median_ms": ms(live_ours), "tail_F_median_ms": ms(live_tail),
              "logs_f_max_ms": round(1000 * max(live_ours), 1) if live_ours else None,
              "slurm_calls": [r.calls for r in rounds],
              "exit_status": [r.rc for r in rounds],
              "end_to_return_s": [round(e, 3) for e in ends],
              "end_to_return_median_s": round(statistics.median(ends), 3),
              "end_to_tail_F_line_ms": [round(1000 * e, 1) for e in tail_ends],
              "met": ms(live_ours) <= TARGET_MS and max(ends) <= TARGET_END_S}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['lines']} lines: hpctrain logs -f {result['logs_f_median_ms']} ms median "
              f"(max {result['logs_f_max_ms']} ms), tail -F {result['tail_F_median_ms']} ms; "
              f"job's end to logs -f's return: {result['end_to_return_s']} s (exit status "
              f"{result['exit_status']}); its last line reached tail -F after "
              f"{result['end_to_tail_F_line_ms']} ms (tail -F never returns); "
              f"{result['slurm_calls']} SLURM calls; targets {TARGET_MS:g} ms and "
              f"{TARGET_END_S:g} s: {'met' if result['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

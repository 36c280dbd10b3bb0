"""What the stall watch costs, and how soon a stall ends the job (issue 41).

1. CPU: the per-node monitor run as a job runs it, side by side in one run, once with the watch
   off (`HPCTRAIN_STALL_WINDOW=off`) and once on, while --ranks ranks report progress into the
   run directory every second; each sampler's own CPU time (`self_cpu_s` of its end row) per
   minute is compared. Target: the watch adds under 1% of one core.
2. Time from stall to ended job: two real gloo ranks of examples/stall/hang_in_collective.py,
   the last asleep in its own code; the watch (window --window s) is polled as the monitor
   polls it; reported are the seconds from the last progress to the evidence kept and the
   job's action asked (py-spy's dump of both ranks included). Needs torch.

    python benchmarks/stall_watch.py [--seconds 60] [--ranks 8] [--window 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hpctrain import rundir
from hpctrain.monitor import stall
from hpctrain.progress import Reporter

PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "stall" / "hang_in_collective.py"
TARGET_PCT = 1.0


def _sampler(run_dir: Path, window: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HPCTRAIN_STALL_WINDOW": window, "HPCTRAIN_ON_STALL": "report"}
    return subprocess.Popen([sys.executable, "-m", "hpctrain.monitor", "sample", "--run-dir",
                             str(run_dir), "--interval", "10", "--node", "n"], env=env)


def cpu_cost(seconds: float, ranks: int) -> dict[str, float]:
    """Both samplers' CPU per minute while `ranks` ranks report every second."""
    with tempfile.TemporaryDirectory() as off_dir, tempfile.TemporaryDirectory() as on_dir:
        stop = threading.Event()
        reporters = [Reporter(Path(d) / rundir.PROGRESS_DIR, "n", r)
                     for d in (off_dir, on_dir) for r in range(ranks)]

        def report() -> None:
            step = 0
            while not stop.wait(1.0):
                step += 1
                for rep in reporters:
                    rep.report(step)

        writer = threading.Thread(target=report, daemon=True)
        writer.start()
        procs = {"off": _sampler(Path(off_dir), "off"), "on": _sampler(Path(on_dir), "")}
        time.sleep(seconds)
        for proc in procs.values():
            proc.send_signal(signal.SIGUSR2)
            proc.wait(30)
        stop.set()
        ends = {k: json.loads((Path(d) / rundir.MONITOR_DIR / "n.jsonl").read_text()
                              .splitlines()[-1]) for k, d in (("off", off_dir), ("on", on_dir))}
    per_min = {k: 60 * e["self_cpu_s"] / e["elapsed_s"] for k, e in ends.items()}
    return {"seconds": seconds, "ranks": ranks, "cpu_s_per_min_watch_off": per_min["off"],
            "cpu_s_per_min_watch_on": per_min["on"],
            "watch_pct_of_one_core": 100 * (per_min["on"] - per_min["off"]) / 60}


def stall_to_end(window: float) -> dict[str, float]:
    """Seconds from the last progress of two hung gloo ranks to the watch's action."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        procs = [subprocess.Popen(
            [sys.executable, str(PROGRAM)],
            env={**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531",
                 "RANK": str(rank), "WORLD_SIZE": "2", "HPCTRAIN_RUN_DIR": tmp,
                 "SLURMD_NODENAME": "n", "HANG_AT": "3", "OMP_NUM_THREADS": "1"})
            for rank in (0, 1)]
        acted: list[float] = []
        watch = stall.StallWatch(run_dir, "n", True, 1, window, "cancel",
                                 lambda a, r: acted.append(time.time()))
        try:
            while not acted:
                time.sleep(stall.CHECK_EVERY_S)
                watch.check(time.time())
            last = max(r.t for r in stall.read_progress(run_dir, 0))
            report = json.loads((run_dir / rundir.STALL_REPORT).read_text())
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return {"window_s": window, "last_progress_to_action_s": acted[0] - last,
            "beyond_window_s": acted[0] - last - window,
            "stacks_kept": sum(1 for v in report["nodes"] for r in v["ranks"] if r["stack"])}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    result = {**cpu_cost(args.seconds, args.ranks), **stall_to_end(args.window)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"monitor CPU, {args.ranks} ranks reporting: {result['cpu_s_per_min_watch_off']:.4f} "
          f"CPU s/min without the watch, {result['cpu_s_per_min_watch_on']:.4f} with it: the "
          f"watch costs {result['watch_pct_of_one_core']:.3f}% of one core "
          f"(target under {TARGET_PCT}%)")
    print(f"stall to action: {result['last_progress_to_action_s']:.1f} s after the last "
          f"progress with a {args.window:.0f} s window ({result['beyond_window_s']:.1f} s "
          f"beyond it), {result['stacks_kept']} stacks kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())

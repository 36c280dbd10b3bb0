"""What the per-node monitor costs: CPU seconds of the sampler per sampled minute.

Runs `python -m hpctrain.monitor sample` as a job runs it, for --seconds at --interval, stops it
with SIGUSR2 as the batch script does, and reads the CPU time it reported in its own rows
(`self_cpu_s`: user + system of the sampler process). Start-up (interpreter, imports, the GPU
probe) is paid once per job and shown apart from the steady cost per sample. Target: under 1% of
one core at the default 10 s interval.

    python benchmarks/monitor_cost.py [--interval 1] [--seconds 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_INTERVAL_S = 10.0
TARGET_PCT = 1.0


def measure(interval: float, seconds: float) -> dict[str, float]:
    """Run one sampler; return its start-up CPU, CPU per sample and % of a core."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([sys.executable, "-m", "hpctrain.monitor", "sample",
                                 "--run-dir", tmp, "--interval", str(interval), "--node", "b"])
        time.sleep(seconds)
        proc.send_signal(signal.SIGUSR2)
        proc.wait(30)
        rows = [json.loads(line) for line in (Path(tmp) / "monitor" / "b.jsonl").open()]
    samples = [r for r in rows if r["kind"] == "sample"]
    first, last = samples[0], samples[-1]
    per_sample = (last["self_cpu_s"] - first["self_cpu_s"]) / max(1, len(samples) - 1)
    end = rows[-1]
    return {
        "interval_s": interval, "samples": len(samples), "elapsed_s": end["elapsed_s"],
        "startup_cpu_s": first["self_cpu_s"], "cpu_s_per_sample": per_sample,
        "total_cpu_s": end["self_cpu_s"],
        "cpu_s_per_sampled_minute_at_default": per_sample * 60 / DEFAULT_INTERVAL_S,
        "pct_of_one_core_at_default": 100 * per_sample / DEFAULT_INTERVAL_S,
        "pct_of_one_core_at_interval": 100 * per_sample / interval,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between samples (short: more samples to average)")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    result = measure(args.interval, args.seconds)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['samples']} samples at {args.interval:g} s over "
              f"{result['elapsed_s']:.1f} s")
        print(f"start-up (once per job and node): {result['startup_cpu_s']:.3f} CPU s")
        print(f"per sample: {1000 * result['cpu_s_per_sample']:.2f} CPU ms")
        print(f"at the default {DEFAULT_INTERVAL_S:g} s: "
              f"{result['cpu_s_per_sampled_minute_at_default']:.4f} CPU s per sampled minute = "
              f"{result['pct_of_one_core_at_default']:.3f}% of one core "
              f"(target < {TARGET_PCT:g}%)")
    return 0 if result["pct_of_one_core_at_default"] < TARGET_PCT else 1


if __name__ == "__main__":
    sys.exit(main())

"""`python -m hpctrain.monitor`: the sampler a job runs on every node, and its summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpctrain.monitor.sampler import DEFAULT_INTERVAL_S
from hpctrain.values import rundir


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hpctrain.monitor",
                                description="Sample this node's GPUs, CPU and memory into a "
                                "run directory, or summarize what was sampled.")
    sub = p.add_subparsers(dest="action", required=True)
    sample = sub.add_parser("sample", help="sample until SIGUSR2, SIGTERM or SIGINT "
                            "(one per node, in a job)")
    sample.add_argument("--run-dir", required=True, type=Path)
    sample.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                        help="seconds between samples (default %(default)s)")
    sample.add_argument("--node", help="node name (default: $SLURMD_NODENAME, else hostname)")
    summary = sub.add_parser("summarize", help=f"write {rundir.MONITOR_SUMMARY} from the rows")
    summary.add_argument("--run-dir", required=True, type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one action; errors are one line on stderr, never a traceback in a job log."""
    args = _parser().parse_args(argv)
    try:
        if args.action == "sample":
            if not args.interval > 0:
                print("hpctrain monitor: --interval must be above 0", file=sys.stderr)
                return 2
            from hpctrain.monitor.sampler import run_sampler

            run_sampler(args.run_dir, args.interval, args.node)
            return 0
        from hpctrain.monitor.stats import write_summary

        path = write_summary(args.run_dir)
        # stderr: the job's stdout stays the user's own, down to its last line.
        print(f"hpctrain monitor: summary in {path}" if path else
              f"hpctrain monitor: no samples in {args.run_dir}", file=sys.stderr)
        return 0
    except OSError as e:
        print(f"hpctrain monitor: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""`python -m hpctrain.supervisor --restarts N -- CMD`: a launch step, restarted in the job."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hpctrain.supervisor",
                                description="Run a job's launch step (srun ...) and start it "
                                "again inside the allocation when it fails or stalls.")
    p.add_argument("--restarts", type=int, required=True, help="restarts allowed (0: none)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="the run directory (default: $HPCTRAIN_RUN_DIR)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the launch step, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    """Supervise the command; errors are one line on stderr, never a traceback in a job log."""
    args = _parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run_dir = args.run_dir or Path(os.environ.get("HPCTRAIN_RUN_DIR") or ".")
    if not command or args.restarts < 0:
        print("hpctrain supervisor: give --restarts N (N >= 0) and a command after --",
              file=sys.stderr)
        return 2
    from hpctrain.supervisor.loop import Supervisor

    try:
        return Supervisor.from_environment(command, run_dir, args.restarts).run()
    except OSError as e:
        print(f"hpctrain supervisor: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

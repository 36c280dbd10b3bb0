"""Start-up latency of hpctrain on a login node, side by side with `torchx --help`.

Four hpctrain commands are timed against the peer in one run, round-robin, so that machine
noise hits all of them alike: `hpctrain --help`, `hpctrain status` on an empty history and
on one of 20 ended jobs (what a login node answers most), and
`hpctrain render --profile raven --nodes 2 --dry-run`. The import floor of the CLI's libraries
(typer, rich, pydantic, jinja2, pyyaml) is shown for reference. Target (issue 43): each
hpctrain command's median at or below 0.8x torchx's.

torchx is installed into a venv of its own (benchmarks/.venv-torchx) when missing, so that it
cannot change hpctrain's environment.

    python benchmarks/cli_latency.py [--runs 21] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TORCHX_VENV = HERE / ".venv-torchx"
HPCTRAIN = [sys.executable, "-m", "hpctrain"]
TARGET = 0.8  # of `torchx --help`


def _torchx() -> list[str]:
    exe = TORCHX_VENV / "bin" / "torchx"
    if not exe.exists():
        print(f"installing torchx into {TORCHX_VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(TORCHX_VENV)], check=True)
        subprocess.run([str(TORCHX_VENV / "bin" / "pip"), "install", "--quiet",
                        "--disable-pip-version-check", "torchx"], check=True)
    return [str(exe), "--help"]


def _commands() -> dict[str, list[str]]:
    return {
        "torchx --help": _torchx(),
        "hpctrain --help": [*HPCTRAIN, "--help"],
        "hpctrain status": [*HPCTRAIN, "status"],
        "hpctrain status 20": [*HPCTRAIN, "status"],
        "hpctrain render": [*HPCTRAIN, "render", "--profile", "raven", "--nodes", "2",
                            "--dry-run"],
        "import floor": [sys.executable, "-c", "import typer, rich, pydantic, jinja2, yaml"],
    }


def _time(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _compile_bytecode() -> None:
    # pip compiles an installed package's .pyc files (torchx's included); a checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would otherwise compile hpctrain from source on every call.
    import compileall

    import hpctrain

    compileall.compile_dir(str(Path(hpctrain.__file__).parent), quiet=1)


def _ended_jobs(home: str, count: int = 20) -> None:
    """A history of `count` jobs that ended (COMPLETED, as a refresh stores them)."""
    from hpctrain.history import History, NewJob, StateUpdate

    history = History(Path(home) / "state" / "history.sqlite3")
    for i in range(count):
        row = history.add(NewJob(
            job_id=str(1000 + i), cluster="raven", profile="raven", job_name=f"run{i}",
            partition="gpu", nodes=2, gpus_per_node=4, total_gpus=8,
            command=["python", "train.py"], run_dir=None, script_path=None, stdout_path=None,
            stderr_path=None, workdir=home, git_commit=None, git_dirty=None,
            time_limit_s=3600))
        history.update([StateUpdate(id=row.id, state="COMPLETED", terminal=True, stale=False,
                                    slurm_state="COMPLETED", exit_code=0, node_list="n[1-2]",
                                    elapsed_s=1800, time_limit_s=3600)])


def measure(runs: int) -> dict[str, float]:
    """Median seconds per command, taken round-robin."""
    _compile_bytecode()
    commands = _commands()
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as ended:
        # An empty history and a cold-then-warm profile cache of the benchmark's own; the
        # 20 ended jobs in a home of their own.
        _ended_jobs(ended)
        env = {**os.environ, "HPCTRAIN_HOME": home}
        env.pop("SLURM_CONF", None)
        envs = {name: {**env, "HPCTRAIN_HOME": ended} if name.endswith(" 20") else env
                for name in commands}
        # Warm the page cache, .pyc files and profile cache; the first status of the ended
        # jobs makes their verdicts, as a user's first look after they end does.
        for name, cmd in commands.items():
            _time(cmd, envs[name])
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, cmd in commands.items():
                samples[name].append(_time(cmd, envs[name]))
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    medians = measure(args.runs)
    peer = medians["torchx --help"]
    ours = {k: v for k, v in medians.items() if k.startswith("hpctrain")}
    ok = all(v <= TARGET * peer for v in ours.values())
    if args.json:
        print(json.dumps({"median_ms": {k: round(v * 1000, 1) for k, v in medians.items()},
                          "runs": args.runs, "ok": ok}))
    else:
        for name, value in medians.items():
            ratio = f"{value / peer:5.2f}x torchx" if name != "torchx --help" else ""
            print(f"{name:<19} {value * 1000:7.1f} ms  {ratio}")
        print(f"{args.runs} runs each, round-robin; target: every hpctrain command <= "
              f"{TARGET}x torchx --help -> {'OK' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""`hpctrain status --all` with 1,000 tracked jobs, and how often `logs -f` asks SLURM.

Needs the dev cluster (`hpctrain devcluster up`; found through SLURM_CONF or HPCTRAIN_HOME).
Two temp histories of `--jobs` jobs each: `--real` tiny jobs submitted to the dev cluster
with `hpctrain submit`, the rest recorded jobs (ids the cluster's accounting really holds,
then ids it never saw):
- worst case: every recorded job inserted as unfinished, so a refresh asks about all of them
  (ids SLURM never saw stay unfinished, marked stale, and are asked again every time);
- typical: the recorded jobs inserted as finished (cached), as a history that grew over time.

Targets: at most 2 SLURM calls per refresh whatever the count; `logs -f` at most one call
every 5 s.

    python benchmarks/status_scale.py [--jobs 1000] [--real 20] [--runs 5] [--json]
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
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.history import History, NewJob, StateUpdate
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import resolve_slurm_conf
from hpctrain.slurm.transport import Answer, LocalTransport
from hpctrain.tracking import logs
from hpctrain.tracking.watcher import JobWatcher

MAX_CALLS = 2
LOGS_INTERVAL_S = 5.0


@dataclass(frozen=True)
class _Timed(LocalTransport):
    """This machine's transport, noting when each SLURM question starts (the benchmark's own
    record; the version the client learns once is no question to slurmctld)."""

    started: list[float] = field(default_factory=list)

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> Answer:
        if "--version" not in argv:
            self.started.append(time.monotonic())
        return super().execute(argv, input, limit, cwd)


def _hpctrain(env: dict[str, str], cwd: Path, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "hpctrain", *args], env=env, cwd=cwd,
                         capture_output=True, text=True, check=False, timeout=600)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"hpctrain {' '.join(args)} failed:\n{res.stderr}")
    return took, res.stdout


def _recorded_ids(client: SlurmClient) -> list[str]:
    """Job ids the dev cluster's accounting holds, oldest first."""
    out = client.run(["sacct", "-X", "-n", "-P", "-o", "JobIDRaw", "-S", "2000-01-01",
                      "-E", "now", "-a"]).stdout
    return [ln.strip() for ln in out.splitlines() if ln.strip().isdigit()]


def _fill(history: History, cluster: str, ids: list[str], total: int, finished: bool) -> int:
    """Insert recorded jobs until the history holds `total` jobs; return how many."""
    existing = {r.job_id for r in history.all()}
    # Ids far above the cluster's counter stand for jobs SLURM never heard of.
    pool = [i for i in ids if i not in existing] + [str(10_000_000 + i) for i in range(total)]
    rows = [history.add(NewJob(
        job_id=job_id, cluster=cluster, profile="local", job_name=f"rec{job_id}",
        partition="debug", nodes=1, gpus_per_node=1, total_gpus=1, command=["true"],
        run_dir=None, script_path=None, stdout_path=None, stderr_path=None, workdir="/",
        git_commit=None, git_dirty=None, time_limit_s=60,
    )) for job_id in pool[: total - len(existing)]]
    if finished:
        history.update(StateUpdate(id=r.id, state="COMPLETED", terminal=True, stale=False,
                                   exit_code=0, signal=0, elapsed_s=1) for r in rows)
    return len(rows)


def _measure_cli(env: dict[str, str], cwd: Path, runs: int) -> dict[str, float]:
    """Median wall time of `status --all` (table and --json) and the most SLURM calls seen."""
    table_s, json_s, calls = [], [], []
    for _ in range(runs):
        table_s.append(_hpctrain(env, cwd, "status", "--all")[0])
        took, out = _hpctrain(env, cwd, "status", "--all", "--json")
        json_s.append(took)
        calls.append(json.loads(out)["slurm_calls"])
    return {"table_median_s": round(statistics.median(table_s), 3),
            "json_median_s": round(statistics.median(json_s), 3),
            "slurm_calls_max": max(calls)}


def _home(tmp: Path, name: str, conf: str) -> tuple[dict[str, str], History]:
    home = tmp / name
    env = {**os.environ, "HPCTRAIN_HOME": str(home), "SLURM_CONF": conf, "COLUMNS": "160"}
    return env, History(home / "state" / "history.sqlite3")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--real", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--follow-seconds", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    conf = resolve_slurm_conf()
    if not conf:
        raise SystemExit("no dev cluster: run `hpctrain devcluster up` or set SLURM_CONF")
    client = SlurmClient.local(conf, timeout_s=30)
    cluster = client.cluster_name() or ""
    tmp = Path(tempfile.mkdtemp(prefix="hpctrain-bench-"))
    worst_env, worst = _home(tmp, "worst", conf)
    typical_env, typical = _home(tmp, "typical", conf)

    # Real jobs, submitted the way users do, into both histories.
    for i in range(args.real):
        for env in (worst_env, typical_env):
            _hpctrain(env, tmp, "submit", "--profile", "local", "--time", "1", "--job-name",
                      f"bench{i}", "--", "true")
    known = _recorded_ids(client)
    recorded = _fill(worst, cluster, known, args.jobs, finished=False)
    _fill(typical, cluster, known, args.jobs, finished=True)
    assert worst.count() == typical.count() == args.jobs

    # In-process, worst case: one refresh of every unfinished job, then the next one.
    c1 = SlurmClient.local(conf, timeout_s=60)
    t0 = time.perf_counter()
    records, first = JobWatcher(c1, worst, cluster).refresh(worst.all())
    first_s = time.perf_counter() - t0
    final_after = sum(r.terminal for r in records)
    c2 = SlurmClient.local(conf, timeout_s=60)
    t0 = time.perf_counter()
    _, second = JobWatcher(c2, worst, cluster).refresh(worst.all())
    second_s = time.perf_counter() - t0

    # The command as users run it.
    cli_worst = _measure_cli(worst_env, tmp, args.runs)
    cli_typical = _measure_cli(typical_env, tmp, args.runs)

    # logs -f on a real job that prints for a while: count and space the SLURM calls.
    _, out = _hpctrain(typical_env, tmp, "submit", "--profile", "local", "--time", "2",
                       "--json", "--", "bash", "-c",
                       f"for i in $(seq {args.follow_seconds}); do echo $i; sleep 1; done")
    job_id = json.loads(out)["job_id"]
    (rec,) = [r for r in typical.by_job_ids([job_id]) if r.cluster == cluster]
    timed = _Timed(conf)
    c3 = SlurmClient(timed, timeout_s=30)
    received = bytearray()
    t0 = time.monotonic()
    res = logs.follow(rec, JobWatcher(c3, typical, cluster), received.extend, lambda _s: None)
    follow_s = time.monotonic() - t0
    gaps = [b - a for a, b in zip(timed.started, timed.started[1:], strict=False)]

    most_calls = max(first.calls, second.calls, cli_worst["slurm_calls_max"],
                     cli_typical["slurm_calls_max"])
    result = {
        "jobs_in_history": args.jobs,
        "real_jobs": args.real,
        "recorded_jobs": recorded,
        "worst_first_refresh": {"asked": first.asked, "slurm_calls": first.calls,
                                "seconds": round(first_s, 3), "final_after": final_after},
        "worst_next_refresh": {"asked": second.asked, "slurm_calls": second.calls,
                               "seconds": round(second_s, 3)},
        "status_all_worst": cli_worst,
        "status_all_typical": cli_typical,
        "logs_follow": {"seconds": round(follow_s, 1), "slurm_calls": len(timed.started),
                        "min_gap_s": round(min(gaps), 2) if gaps else None,
                        "calls_per_minute": round(len(timed.started) / follow_s * 60, 1),
                        "lines": received.count(b"\n"), "final_state": res.record.state},
        "ok": most_calls <= MAX_CALLS and (not gaps or min(gaps) >= LOGS_INTERVAL_S - 0.01),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0 if result["ok"] else 1
    lf = result["logs_follow"]
    print(f"history: {args.jobs} jobs ({args.real} real, {recorded} recorded)")
    print(f"worst case, first refresh of all {first.asked} unfinished: {first.calls} SLURM "
          f"calls, {first_s * 1000:.0f} ms ({final_after} now cached as final)")
    print(f"worst case, next refresh ({second.asked} asked): {second.calls} SLURM calls, "
          f"{second_s * 1000:.0f} ms")
    for name, m in (("worst", cli_worst), ("typical", cli_typical)):
        print(f"`hpctrain status --all`, {name}: table median {m['table_median_s']} s, "
              f"--json median {m['json_median_s']} s, {m['slurm_calls_max']:g} SLURM call(s)")
    print(f"`logs -f` for {lf['seconds']} s: {lf['slurm_calls']} SLURM calls, min gap "
          f"{lf['min_gap_s']} s ({lf['calls_per_minute']}/min), {lf['lines']} lines, "
          f"ended {lf['final_state']}")
    print("OK" if result["ok"] else "OVER TARGET")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

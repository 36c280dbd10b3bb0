"""What watching every program costs, how soon a hang frees its allocation, and whether correct
runs complete (issue 51), on the dev cluster (`hpctrain devcluster up`, profile local).

1. Cost: two healthy 2-node jobs of examples/faults/ddp_faults.py (a user's own DDP script
   that reports no progress, one rank a node), side by side at once on the same nodes, one
   watched (the default) and one with `--stall-window off` (the monitor samples, nothing
   watches); each node's monitor process's own CPU time (`self_cpu_s` of its rows, after its
   first sample: its start-up is told apart) per minute, as a share of one core. Target: the
   watch under 1% of one core per node.
2. Hang to freed allocation: rank 1 asleep in its own function before a collective, with
   `--stall-window W`, on 2 nodes x 2 ranks: the user's script (its last progress: the time
   its last `step` line reached the output, polled here every 0.05 s) and the packaged trainer
   running a user's LightningModule (its last progress: the ranks' last progress report);
   reported: seconds from that to the watch's verdict (stall.json) and to sacct's End (the
   allocation freed; sacct keeps whole seconds, so this one may read up to 1 s early).
3. Correct runs: `ddp_faults.py --fault none` on 2 nodes x 2 ranks, N times: how many
   COMPLETED, and how many printed gloo's teardown race. Target: N of N.

    python benchmarks/stall_watch.py [--seconds 120] [--window 20] [--repeats 20] [--json]

Run it with the hpctrain environment of the dev cluster it should use (HPCTRAIN_HOME and
HPCTRAIN_DEVCLUSTER_PORT_OFFSET for a second one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpctrain.values.rundir import RunDir

HPCTRAIN = [sys.executable, "-m", "hpctrain"]
PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "faults" / "ddp_faults.py"
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
TARGET_PCT = 1.0
RACE = "terminate called without an active exception"

# A user's LightningModule for the packaged trainer: rank 1 sleeps in a function of its own
# before the gradient all-reduce at its third training_step (FAULT_ROW, from `-e`).
MODULE = '''\
import os, time
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def wait_for_the_others(seconds):
    time.sleep(seconds)


class Data(L.LightningDataModule):
    def setup(self, stage):
        x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
        self.train_set = TensorDataset(x, x.sum(1, keepdim=True))

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=4)


class Faulty(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net, self.calls = nn.Linear(4, 1), 0
        self.row = os.environ.get("FAULT_ROW", "")

    def training_step(self, batch, batch_idx):
        self.calls += 1
        if self.row == "sleep" and self.global_rank == 1 and self.calls == 3:
            wait_for_the_others(3600)
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)
'''


def _project(root: Path) -> Path:
    """A git project with the user's script as train.py and the module as faultpkg."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROGRAM, root / "train.py")
    (root / "faultpkg").mkdir(exist_ok=True)
    (root / "faultpkg" / "__init__.py").write_text("")
    (root / "faultpkg" / "model.py").write_text(MODULE)
    git = ["git", "-C", str(root), "-c", "user.email=bench@example.org", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "project"], check=True)
    return root


def _submit(cwd: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([*HPCTRAIN, "submit", "--profile", "local", "--json", *args],
                          cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hpctrain submit {' '.join(args)}: {done.stderr}")
    job: dict[str, Any] = json.loads(done.stdout)
    return job


def _sacct(job_ids: list[str]) -> dict[str, dict[str, str]]:
    fields = ["JobID", "State", "Start", "End"]
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", ",".join(fields),
                          *(f"-j{j}" for j in job_ids)],
                         capture_output=True, text=True, check=False).stdout
    rows = [dict(zip(fields, line.split("|"), strict=False)) for line in out.splitlines()]
    return {r["JobID"]: r for r in rows if r.get("JobID") in job_ids}


def _wait(job_ids: list[str], timeout_s: float,
          each: Callable[[], None] | None = None) -> dict[str, dict[str, str]]:
    """sacct's rows of the jobs once every one has ended (`each`: called between polls)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = _sacct(job_ids)
        if len(rows) == len(job_ids) and all(r["State"].split()[0] in TERMINAL
                                             for r in rows.values()):
            return rows
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {job_ids} not ended after {timeout_s:.0f} s: {rows}")
        for _ in range(10):
            if each:
                each()
            time.sleep(0.05)


def _epoch(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def _monitor_cost(run_dir: Path) -> dict[str, float]:
    """Per node: CPU s per minute after the first sample, and the start-up's CPU s."""
    out = {}
    for path in sorted(RunDir(run_dir).monitor_dir.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        timed = [r for r in rows if r.get("kind") in ("sample", "end")
                 and isinstance(r.get("self_cpu_s"), int | float)]
        if len(timed) < 2:
            continue
        first, last = timed[0], timed[-1]
        span = float(last["t"]) - float(first["t"])
        if span > 0:
            out[path.stem] = 60 * (float(last["self_cpu_s"]) - float(first["self_cpu_s"])) / span
            out[f"{path.stem}:startup_cpu_s"] = float(first["self_cpu_s"])
    return out


def cost(project: Path, seconds: float) -> dict[str, Any]:
    """Two healthy jobs at once, watched and not: each node's monitor CPU per minute."""
    steps = str(int(seconds / 0.2))
    jobs = {watch: _submit(project, "--nodes", "2", "--gpus-per-node", "1",
                           "--time", str(int(seconds / 60) + 5),
                           *(["--stall-window", "off"] if watch == "off" else []),
                           "--", "python", "train.py", "--steps", steps, "--step-s", "0.2")
            for watch in ("on", "off")}
    rows = _wait([str(j["job_id"]) for j in jobs.values()], seconds + 600)
    result: dict[str, Any] = {"seconds": seconds}
    for watch, job in jobs.items():
        state = rows[str(job["job_id"])]["State"].split()[0]
        per_node = _monitor_cost(Path(job["run_dir"]))
        minutes = {n: v for n, v in per_node.items() if ":" not in n}
        result[f"watch_{watch}"] = {"job": job["job_id"], "state": state,
                                    "cpu_s_per_min": minutes,
                                    "startup_cpu_s": {n.split(":")[0]: v for n, v in
                                                      per_node.items() if ":" in n}}
    on, off = result["watch_on"]["cpu_s_per_min"], result["watch_off"]["cpu_s_per_min"]
    result["monitor_pct_of_one_core"] = {n: 100 * v / 60 for n, v in on.items()}
    result["watch_pct_of_one_core"] = {n: 100 * (on[n] - off.get(n, 0.0)) / 60 for n in on}
    return result


def _hang(project: Path, window: int, args: list[str], last_progress: Callable[[Path], float],
          each: Callable[[Path], None] | None = None) -> dict[str, Any]:
    job = _submit(project, "--nodes", "2", "--gpus-per-node", "2", "--time", "5",
                  "--stall-window", str(window), *args)
    run_dir = Path(job["run_dir"])
    row = _wait([str(job["job_id"])], 600,
                (lambda: each(run_dir)) if each else None)[str(job["job_id"])]
    last = last_progress(run_dir)
    stall = RunDir(run_dir).stall_report
    report = json.loads(stall.read_text()) if stall.exists() else {}
    verdict = report.get("verdict") or {}
    return {"job": job["job_id"], "state": row["State"].split()[0], "window_s": window,
            "last_progress_to_verdict_s": round(float(report["detected_t"]) - last, 1)
            if report else None,
            "last_progress_to_end_s": round(_epoch(row["End"]) - last, 1),
            "verdict": verdict.get("kind"), "rank": verdict.get("rank")}


class _StepLines:
    """When each `step` line of the user's script reached its output (polled)."""

    def __init__(self) -> None:
        self.seen = 0
        self.last = 0.0

    def poll(self, run_dir: Path) -> None:
        for out in run_dir.glob("hpctrain-*.out"):
            steps = out.read_text(errors="replace").count("\nstep ")
            if steps > self.seen:
                self.seen, self.last = steps, time.time()

    def last_progress(self, run_dir: Path) -> float:
        return self.last


def _last_report(run_dir: Path) -> float:
    return max(float(json.loads(p.read_text())["t"])
               for p in RunDir(run_dir).progress_dir.glob("*.json"))


def hangs(project: Path, window: int) -> dict[str, Any]:
    """A rank asleep before a collective: the user's script, then the packaged trainer."""
    lines = _StepLines()
    script = _hang(project, window, ["--", "python", "train.py", "--fault", "sleep", "--rank",
                                     "1", "--at", "3", "--steps", "30"],
                   lines.last_progress, lines.poll)
    trainer = _hang(project, window, ["-e", "FAULT_ROW=sleep", "--", "python", "-m",
                                      "hpctrain.trainer", "--task", "custom", "--max-epochs",
                                      "20", "--set=custom.module=faultpkg.model:Faulty",
                                      "--set=custom.datamodule=faultpkg.model:Data"],
                    _last_report)
    return {"script": script, "trainer": trainer}


def repeats(project: Path, n: int) -> dict[str, Any]:
    """The correct run N times, queued at once: how many completed, how many raced."""
    jobs = [_submit(project, "--nodes", "2", "--gpus-per-node", "2", "--time", "3", "--",
                    "python", "train.py", "--fault", "none") for _ in range(n)]
    rows = _wait([str(j["job_id"]) for j in jobs], 120 + 60 * n)
    states = [rows[str(j["job_id"])]["State"].split()[0] for j in jobs]
    raced = sum(RACE in Path(j["stderr"]).read_text(errors="replace") for j in jobs)
    return {"runs": n, "completed": states.count("COMPLETED"), "teardown_race": raced,
            "states": states}


def _slurm_conf() -> str:
    """The dev cluster's slurm.conf, for sacct (hpctrain finds it by itself)."""
    out = subprocess.run([*HPCTRAIN, "devcluster", "status", "--json"], capture_output=True,
                         text=True, check=False).stdout
    conf = json.loads(out or "{}").get("slurm_conf")
    if not conf:
        raise SystemExit("the dev cluster is not up: run `hpctrain devcluster up` first")
    return str(conf)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=120.0, help="the healthy jobs' length")
    p.add_argument("--window", type=int, default=20, help="--stall-window of the hangs")
    p.add_argument("--repeats", type=int, default=20, help="correct runs")
    p.add_argument("--skip", action="append", default=[], choices=["cost", "hang", "repeat"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ["SLURM_CONF"] = _slurm_conf()
    with tempfile.TemporaryDirectory(prefix="stall-watch-") as tmp:
        project = _project(Path(tmp) / "project")
        result: dict[str, Any] = {}
        if "cost" not in args.skip:
            result["cost"] = cost(project, args.seconds)
        if "hang" not in args.skip:
            result["hang"] = hangs(project, args.window)
        if "repeat" not in args.skip:
            result["repeat"] = repeats(project, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    _print(result)
    return 0


def _print(result: dict[str, Any]) -> None:
    if "cost" in result:
        c = result["cost"]
        print(f"watcher's cost, 2 healthy jobs of ddp_faults.py side by side, "
              f"{c['seconds']:.0f} s each (jobs {c['watch_on']['job']} watched, "
              f"{c['watch_off']['job']} --stall-window off):")
        print(f"  {'node':8} {'monitor CPU s/min':>18} {'without watch':>14} "
              f"{'monitor % core':>15} {'watch % core':>13}")
        for node, on in sorted(c["watch_on"]["cpu_s_per_min"].items()):
            off = c["watch_off"]["cpu_s_per_min"].get(node, float("nan"))
            print(f"  {node:8} {on:18.4f} {off:14.4f} {c['monitor_pct_of_one_core'][node]:14.3f}%"
                  f" {c['watch_pct_of_one_core'][node]:12.3f}%")
        print(f"  target: the watch under {TARGET_PCT}% of one core per node; the jobs ended "
              f"{c['watch_on']['state']} (watched) and {c['watch_off']['state']}")
    if "hang" in result:
        print("hang (rank 1 asleep before a collective), from the last progress:")
        print(f"  {'program':8} {'job':>6} {'state':>10} {'window':>7} {'verdict':>8} "
              f"{'to verdict':>11} {'to End':>7}")
        for name, h in result["hang"].items():
            print(f"  {name:8} {h['job']:>6} {h['state']:>10} {h['window_s']:>6}s "
                  f"{h['verdict'] or '-':>8} {h['last_progress_to_verdict_s'] or '-':>10}s "
                  f"{h['last_progress_to_end_s']:>6}s")
    if "repeat" in result:
        r = result["repeat"]
        print(f"correct runs: {r['completed']} of {r['runs']} COMPLETED; teardown race printed "
              f"in {r['teardown_race']}")


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    sys.exit(main())

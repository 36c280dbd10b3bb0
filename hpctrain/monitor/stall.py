"""The stall watcher: inside the job, beside the sampler on every node (docs/long-runs.md).

Every rank reports its progress (hpctrain.progress). When no rank has reported for the stall
window, each node's watcher collects the stacks of its own ranks (py-spy, else the rank's
SIGQUIT dump) into the run directory; the watcher on the job's first node then gathers the
nodes' views into one report and ends the job (or requeues it, or only reports), instead of
letting a hung collective hold the allocation until its time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpctrain import rundir
from hpctrain.monitor import stacks
from hpctrain.progress import STACK_SIGNAL, record_name, safe_name

# The window when the job names none: this many step times, within the floor and the
# ceiling (a first step, a validation pass or a checkpoint may take far longer than a step).
STEP_FACTOR = 20.0
FLOOR_S = 120.0
CEILING_S = 1800.0
CHECK_EVERY_S = 5.0
DUMP_TIMEOUT_S = 30.0
SIGNAL_DUMP_WAIT_S = 5.0
GATHER_WAIT_S = 30.0
ACTIONS = ("cancel", "requeue", "report")


@dataclass(frozen=True)
class RankProgress:
    """A rank's last progress report: its step, when, and how long a step takes."""

    node: str
    rank: int
    pid: int
    step: int
    t: float
    step_s: float | None


def read_progress(run_dir: Path, since: float) -> list[RankProgress]:
    """Every rank's last record written at or after `since` (an earlier segment's are stale)."""
    out = []
    for path in sorted((run_dir / rundir.PROGRESS_DIR).glob("*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
            rank = RankProgress(str(row["node"]), int(row["rank"]), int(row["pid"]),
                                int(row["step"]), float(row["t"]),
                                None if row.get("step_s") is None else float(row["step_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half a file from another writer: read it at the next check
        if rank.t >= since:
            out.append(rank)
    return out


def window_s(ranks: Sequence[RankProgress], override: float | None) -> float:
    """The job's own window, else STEP_FACTOR slowest step times within the floor and ceiling."""
    if override is not None:
        return override
    times = [r.step_s for r in ranks if r.step_s]
    if not times:
        return FLOOR_S
    return min(CEILING_S, max(FLOOR_S, STEP_FACTOR * max(times)))


def silent_s(ranks: Sequence[RankProgress], now: float) -> float | None:
    """Seconds since any rank last reported (None: none has reported yet)."""
    return now - max(r.t for r in ranks) if ranks else None


def parse_window(text: str | None) -> tuple[bool, float | None]:
    """`HPCTRAIN_STALL_WINDOW`: (watch?, the window in seconds or None for the derived one)."""
    text = (text or "").strip()
    if text in ("", "auto"):
        return True, None
    if text == "off":
        return False, None
    try:
        value = float(text)
    except ValueError:
        return True, None
    return (value > 0), (value if value > 0 else None)


def _py_spy() -> str | None:
    """py-spy's binary: beside this Python, in the bin/ of a venv on its path (hpctrain's
    set-up layers one venv over another), or on PATH."""
    bins = [Path(sys.executable).parent] + [Path(p).parents[2] / "bin" for p in sys.path
                                            if p.endswith("site-packages")]
    found = next((b / "py-spy" for b in bins if (b / "py-spy").is_file()), None)
    return str(found) if found else shutil.which("py-spy")


def dump_with_py_spy(pid: int) -> str | None:
    """Every thread's Python stack of `pid`, read from outside by py-spy (None: it could not)."""
    tool = _py_spy()
    if tool is None:
        return None
    try:
        done = subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=DUMP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def dump_with_signal(pid: int, stack_file: Path) -> str | None:
    """The stack the rank writes itself on SIGQUIT (hpctrain.progress arms it)."""
    before = stack_file.stat().st_size if stack_file.exists() else 0
    try:
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return None
    deadline = time.monotonic() + SIGNAL_DUMP_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if stack_file.exists() and stack_file.stat().st_size > before:
            time.sleep(0.3)  # the dump is written in pieces; let it finish
            with stack_file.open("rb") as fh:
                fh.seek(before)
                return fh.read().decode("utf-8", "replace")
    return None


def collect_node(run_dir: Path, node: str, ranks: Sequence[RankProgress], now: float,
                 window: float) -> dict[str, Any]:
    """This node's ranks' stacks into the evidence folder, and the node's view as JSON."""
    folder = run_dir / rundir.STALL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in sorted((r for r in ranks if r.node == node), key=lambda r: r.rank):
        name = record_name(r.node, r.rank)
        text, method = dump_with_py_spy(r.pid), "py-spy"
        if text is None:
            stack = run_dir / rundir.PROGRESS_DIR / f"{name}.stack"
            text, method = dump_with_signal(r.pid, stack), "faulthandler"
        if text is not None:
            _write(folder / f"{name}.txt", text)
        rows.append({**asdict(r), "silent_s": round(now - r.t, 1),
                     "stack": f"{name}.txt" if text is not None else None,
                     "method": method if text is not None else None})
    view = {"node": node, "detected_t": round(now, 3), "window_s": window, "ranks": rows}
    _write(folder / f"{safe_name(node)}.json", json.dumps(view) + "\n")
    return view


def gather(run_dir: Path, nodes: int, wait_s: float) -> list[dict[str, Any]]:
    """Every node's view, waiting up to `wait_s` for all `nodes` of them."""
    folder = run_dir / rundir.STALL_DIR
    deadline = time.monotonic() + wait_s
    while True:
        views = []
        for path in sorted(folder.glob("*.json")):
            try:
                views.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        if len(views) >= nodes or time.monotonic() >= deadline:
            return views
        time.sleep(0.5)


def suspect_node(run_dir: Path, views: Sequence[dict[str, Any]]) -> str | None:
    """The one node whose ranks never entered the collective the others waited in."""
    folder = run_dir / rundir.STALL_DIR
    names = {str(row["stack"]) for view in views for row in view.get("ranks") or []
             if row.get("stack")}
    texts = {n: (folder / n).read_text(encoding="utf-8", errors="replace") for n in names
             if (folder / n).is_file()}
    return stacks.suspect_node(stacks.ranks_of(views, texts))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class StallWatch:
    """One node's watcher; `leader` is the job's first node, which reports and acts."""

    run_dir: Path
    node: str
    leader: bool
    nodes: int
    override: float | None
    action: str
    act: Callable[[str, dict[str, Any]], None]
    started: float = 0.0
    gpus: int = 0  # the job's GPUs, for the GPU-hours a stall's early end saves
    retries_left: int = 0  # --retries: a stall that points at one node is retried without it

    def check(self, now: float) -> bool:
        """One look at the ranks; True once the stall was handled (the watch is over)."""
        ranks = read_progress(self.run_dir, self.started)
        quiet = silent_s(ranks, now)
        window = window_s(ranks, self.override)
        if quiet is None or quiet < window:
            return False
        collect_node(self.run_dir, self.node, ranks, now, window)
        if self.leader:
            views = gather(self.run_dir, self.nodes, GATHER_WAIT_S)
            suspect = suspect_node(self.run_dir, views)
            action = "retry" if self.retries_left > 0 and suspect else self.action
            report = {"detected_t": round(now, 3), "window_s": window,
                      "silent_s": round(quiet, 1), "action": action,
                      "job_id": os.environ.get("SLURM_JOB_ID"), "gpus": self.gpus,
                      "suspect_node": suspect, "retries_left": self.retries_left,
                      "nodes": views}
            _write(self.run_dir / rundir.STALL_REPORT, json.dumps(report, indent=1) + "\n")
            self.act(action, report)
        return True

    def run(self, stop: threading.Event) -> None:
        """Check every CHECK_EVERY_S seconds until a stall is handled or `stop` is set."""
        while not stop.wait(CHECK_EVERY_S):
            try:
                if self.check(time.time()):
                    return
            except OSError as e:
                print(f"hpctrain monitor: stall watch: {e}", file=sys.stderr)


def slurm_action(action: str, report: dict[str, Any]) -> None:
    """End the job (`cancel`), put it back in the queue (`requeue`), submit it again without
    the suspect node and end this one (`retry`), or leave it (`report`)."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job or action == "report":
        return
    if action == "retry" and not _retry(job, str(report["suspect_node"]),
                                         int(report["retries_left"])):
        action = "cancel"
    argv = ["scontrol", "requeue", job] if action == "requeue" else ["scancel", job]
    print(f"hpctrain monitor: no rank progressed within the stall window; {' '.join(argv)}",
          file=sys.stderr)
    _run(argv)


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(list(argv), timeout=60, check=False, capture_output=True,
                              text=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"hpctrain monitor: {argv[0]}: {e}", file=sys.stderr)
        return None


def _retry(job: str, node: str, left: int) -> bool:
    """The job's own script submitted again, after this one, without `node`; its id is kept
    in the run directory for `status` (one job's attempts). False: sbatch refused it."""
    run_dir = Path(os.environ.get("HPCTRAIN_RUN_DIR", "."))
    script = Path(os.environ.get("HPCTRAIN_SCRIPT") or run_dir / rundir.SCRIPT)
    done = _run(["sbatch", "--parsable", f"--exclude={node}", f"--dependency=afterany:{job}",
                 f"--export=ALL,HPCTRAIN_RETRIES_LEFT={left - 1}", str(script)])
    new = done.stdout.strip().split(";")[0] if done and done.returncode == 0 else ""
    if not new.isdigit():
        print(f"hpctrain monitor: the retry was not submitted: "
              f"{(done.stderr if done else '').strip()}", file=sys.stderr)
        return False
    with (run_dir / rundir.RETRIES).open("a", encoding="utf-8") as fh:
        fh.write(f"{new} {job} stall {node}\n")
    print(f"hpctrain monitor: retry submitted as job {new}, without node {node}",
          file=sys.stderr)
    return True


def from_environment(run_dir: Path, node: str, started: float) -> StallWatch | None:
    """The watch the batch script asked for (HPCTRAIN_STALL_WINDOW, HPCTRAIN_ON_STALL)."""
    watch, override = parse_window(os.environ.get("HPCTRAIN_STALL_WINDOW"))
    action = os.environ.get("HPCTRAIN_ON_STALL", "cancel")
    if not watch or action not in ACTIONS:
        return None
    nodes = _count("SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1
    return StallWatch(run_dir, node, os.environ.get("SLURM_PROCID", "0") == "0", nodes,
                      override, action, slurm_action, started,
                      nodes * _count("SLURM_GPUS_ON_NODE"), _count("HPCTRAIN_RETRIES_LEFT"))


def _count(*names: str) -> int:
    """The first of these variables that holds a whole number (0: none does)."""
    values = (os.environ.get(n, "") for n in names)
    return next((int(v) for v in values if v.isdigit()), 0)

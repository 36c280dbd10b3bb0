"""What a stall leaves in the run directory (stall-evidence/): each node's ranks' stacks and
its view, gathered on the job's first node, and the ranks' flight records asked for there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hpctrain.monitor import collectives
from hpctrain.monitor.ranks import RankProgress
from hpctrain.progress import STACK_SIGNAL, record_name, safe_name
from hpctrain.values.rundir import RunDir

DUMP_TIMEOUT_S = 30.0
SIGNAL_DUMP_WAIT_S = 5.0


def _py_spy() -> str | None:
    """py-spy's binary: beside this Python, in the bin/ of a venv on its path (hpctrain's
    set-up layers one venv over another), or on PATH."""
    bins = [Path(sys.executable).parent] + [Path(p).parents[2] / "bin" for p in sys.path
                                            if p.endswith("site-packages")]
    found = next((b / "py-spy" for b in bins if (b / "py-spy").is_file()), None)
    return str(found) if found else shutil.which("py-spy")


def dump_with_py_spy(pid: int) -> str | None:
    """Every thread's Python stack of `pid`, read from outside by py-spy (None: it could not).
    A process that py-spy cannot pause (one stopped by SIGSTOP) is read without pausing it."""
    tool = _py_spy()
    if tool is None:
        return None
    # Full file names: the short ones ("torch/...", "threading.py") cannot be told from the
    # user's own. The subprocesses: a data loader's workers, where a rank may wait; py-spy
    # gives up on all where one child is no Python, so it is asked again without them.
    argv = [tool, "dump", "--full-filenames", "--pid", str(pid)]
    for extra in (["--subprocesses"], [], ["--nonblocking"]):
        try:
            done = subprocess.run(argv + extra, capture_output=True, text=True,
                                  timeout=DUMP_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout
    return None


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
                 window: float, usage: dict[int, dict[str, Any]] | None = None
                 ) -> dict[str, Any]:
    """This node's ranks' stacks into the evidence folder, and the node's view as JSON (with
    each rank's CPU share and /proc state, `usage` by pid, where read)."""
    folder = RunDir(run_dir).stall_dir
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in sorted((r for r in ranks if r.node == node), key=lambda r: r.rank):
        name = record_name(r.node, r.rank)
        text, method = dump_with_py_spy(r.pid), "py-spy"
        if text is None:
            stack = RunDir(run_dir).progress_dir / f"{name}.stack"
            text, method = dump_with_signal(r.pid, stack), "faulthandler"
        if text is not None:
            write_file(folder / f"{name}.txt", text)
        rows.append({**asdict(r), "silent_s": round(now - r.t, 1),
                     "stack": f"{name}.txt" if text is not None else None,
                     "method": method if text is not None else None,
                     **(usage or {}).get(r.pid, {})})
    view = {"node": node, "detected_t": round(now, 3), "window_s": window, "ranks": rows}
    write_file(folder / f"{safe_name(node)}.json", json.dumps(view) + "\n")
    return view


def gather(run_dir: Path, nodes: int, wait_s: float, since: float = 0.0
           ) -> list[dict[str, Any]]:
    """Every node's view collected at or after `since`, waiting up to `wait_s` for all
    `nodes` of them."""
    folder = RunDir(run_dir).stall_dir
    deadline = time.monotonic() + wait_s
    while True:
        views = []
        for path in sorted(folder.glob("*.json")):
            try:
                view = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if float(view.get("detected_t") or 0) >= since:
                views.append(view)
        if len(views) >= nodes or time.monotonic() >= deadline:
            return views
        time.sleep(0.5)


def ask_flight_records(run_dir: Path, request: str) -> None:
    """Ask every rank's hook for its flight record (it looks once a second)."""
    where = RunDir(run_dir)
    where.stall_dir.mkdir(parents=True, exist_ok=True)
    write_file(where.flight_request, request + "\n")


def read_flight_records(run_dir: Path, request: str, ranks: Sequence[int], wait_s: float
                        ) -> collectives.CollectiveView:
    """The ranks' answers to `request`, waiting up to `wait_s` for every rank of `ranks`."""
    folder = RunDir(run_dir).flight_dir
    deadline = time.monotonic() + wait_s
    while True:
        records: dict[int, Any] = {}
        for path in sorted(folder.glob("*.json")):
            try:
                row = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if row.get("request") == request:
                records[int(row["rank"])] = row.get("trace")
        if set(ranks) <= set(records) or time.monotonic() >= deadline:
            return collectives.read(records, ranks)
        time.sleep(0.25)


def stack_texts(run_dir: Path, views: Sequence[dict[str, Any]]) -> dict[str, str]:
    folder = RunDir(run_dir).stall_dir
    names = {str(row["stack"]) for view in views for row in view.get("ranks") or []
             if row.get("stack")}
    return {n: (folder / n).read_text(encoding="utf-8", errors="replace") for n in names
            if (folder / n).is_file()}


def write_file(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

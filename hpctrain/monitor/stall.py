"""The stall watcher: inside the job, beside the sampler on every node (docs/long-runs.md).

Every program is watched, unchanged. A rank that reports its progress (hpctrain.progress) is
silent since its last report; any other program since its output last grew
(monitor/silence.py). When the job has been silent for its window, each node's watcher
collects its own ranks' stacks (py-spy, else the rank's SIGQUIT dump) and CPU use into the run
directory; the watcher on the job's first node asks every rank for its flight record (the rank
hook writes it), gathers the nodes' views, and judges (monitor/verdict.py): silence alone is
never a stall. A stall ends the job (or requeues it, or is only reported) instead of letting a
hung collective hold the allocation until its time limit; ranks that compute are left alone,
and looked at again a window later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpctrain.monitor import collectives, procs, stacks, verdict
from hpctrain.monitor.evidence import (
    ask_flight_records,
    collect_node,
    gather,
    read_flight_records,
    stack_texts,
    write_file,
)
from hpctrain.monitor.ranks import (
    RankProgress,
    read_progress,
    read_ranks,
    registered_ranks,
    silent_s,
    window_s,
)
from hpctrain.monitor.silence import FLOOR_S, OutputRhythm
from hpctrain.values import attempts
from hpctrain.values.outputs import output_files
from hpctrain.values.rundir import RunDir

CHECK_EVERY_S = 5.0
# The rank hook looks for a request once a second; a stopped rank never answers.
FLIGHT_WAIT_S = 5.0
# The CPU samples kept per rank: a minute at one check every CHECK_EVERY_S.
CPU_SAMPLES = 12
GATHER_WAIT_S = 30.0
ACTIONS = ("cancel", "requeue", "report")


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


@dataclass
class StallWatch:
    """One node's watcher; `leader` is the job's first node, which judges, reports and acts."""

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
    outputs: tuple[Path, ...] = ()  # the job's output files: a silent program's clock
    restarts: int = 0  # --restarts: a stall first restarts the ranks inside the job
    requeue: int = 0  # SLURM_RESTART_COUNT: which run of the batch script the attempts are of
    rhythm: OutputRhythm = field(init=False)
    cpu_seen: dict[int, list[tuple[float, float, str]]] = field(default_factory=dict)
    next_look: float = 0.0

    def __post_init__(self) -> None:
        self.rhythm = OutputRhythm(self.outputs)

    def silence(self, ranks: Sequence[RankProgress], now: float
                ) -> tuple[float | None, float, str]:
        """(seconds silent or None, the window, 'progress' or 'output'): progress reports
        where a rank made them, else the output's growth where the job has ranks to judge."""
        reported = read_progress(self.run_dir, self.started)
        if reported:
            return silent_s(reported, now), window_s(reported, self.override), "progress"
        if not ranks:
            return None, FLOOR_S, "output"
        window = self.override if self.override is not None else self.rhythm.window_s()
        return self.rhythm.silent_s(now, self.started), window, "output"

    def check(self, now: float) -> bool:
        """One look at the ranks; True once a stall was handled (the watch is over)."""
        ranks = read_ranks(self.run_dir, self.started)
        self.rhythm.look(now)
        self._sample_cpu(ranks, now)
        quiet, window, source = self.silence(ranks, now)
        if quiet is None or quiet < window or now < self.next_look:
            return False
        self.next_look = now + window  # ranks found computing are looked at again then
        collect_node(self.run_dir, self.node, ranks, now, window, self._usage())
        if not self.leader:
            return False
        return self._judge(ranks, now, quiet, window, source)

    def _sample_cpu(self, ranks: Sequence[RankProgress], now: float) -> None:
        for r in ranks:
            if r.node != self.node:
                continue
            stat = procs.read_stat(r.pid)
            if stat is not None:
                seen = self.cpu_seen.setdefault(r.pid, [])
                seen[:] = (seen + [(now, stat.cpu_s, stat.state)])[-CPU_SAMPLES:]

    def _usage(self) -> dict[int, dict[str, Any]]:
        """Each rank's share of a core over the samples kept, and its last /proc state."""
        out = {}
        for pid, seen in self.cpu_seen.items():
            (t0, c0, _), (t1, c1, state) = seen[0], seen[-1]
            cpu = round((c1 - c0) / (t1 - t0), 3) if t1 > t0 else None
            out[pid] = {"cpu": cpu, "state": state}
        return out

    def _judge(self, ranks: Sequence[RankProgress], now: float, quiet: float, window: float,
               source: str) -> bool:
        """Ask the ranks for their flight records, gather every node's view, judge; act on a
        stall, else note the look (stall-evidence/looks.jsonl) and go on watching."""
        registered = [r.rank for r in registered_ranks(self.run_dir, self.started)]
        first = self._flight(f"{now:.3f}", registered)
        views = gather(self.run_dir, self.nodes, GATHER_WAIT_S, now - 2 * CHECK_EVERY_S - 1)
        # Read again once the nodes' views are in: collectives that went on meanwhile say the
        # job runs, whatever one read found.
        flight = self._flight(f"{now:.3f}-again", registered)
        texts = stack_texts(self.run_dir, views)
        rank_stacks = stacks.ranks_of(views, texts)
        rows = [row for v in views for row in v.get("ranks") or []]
        found = verdict.judge(rows, flight, rank_stacks, collectives.moved(first, flight))
        look = {"t": round(now, 3), "silent_s": round(quiet, 1), "window_s": window,
                "source": source, "verdict": found.as_dict()}
        if not found.stalled:
            with RunDir(self.run_dir).stall_looks.open("a") as fh:
                fh.write(json.dumps(look) + "\n")
            return False
        suspect = stacks.suspect_node(rank_stacks)
        # A retry leaves a node out: not for what the program itself did (a mismatched
        # collective, a rank stopped by a signal).
        retry = self.retries_left > 0 and suspect and found.kind not in ("mismatch", "stopped")
        action = "retry" if retry else self.action
        if action != "report" and self._may_restart(suspect):
            action = "restart"
        report = {"detected_t": round(now, 3), "window_s": window, "silent_s": round(quiet, 1),
                  "source": source, "action": action, "verdict": found.as_dict(),
                  "collectives": flight.describe() if flight.newest else None,
                  "job_id": os.environ.get("SLURM_JOB_ID"), "gpus": self.gpus,
                  "suspect_node": suspect, "retries_left": self.retries_left, "nodes": views}
        write_file(RunDir(self.run_dir).stall_report, json.dumps(report, indent=1) + "\n")
        if action == "restart":
            # The supervisor stops every rank and starts them again; the watch goes on,
            # counting from the restart, and judges the next attempt.
            write_file(RunDir(self.run_dir).restart_request, json.dumps(report) + "\n")
            self._restart_watch(now)
            return False
        self.act(action, report)
        return True

    def _may_restart(self, suspect: str | None) -> bool:
        """True while the job's in-job restarts (`--restarts`, the supervisor's records) are
        not spent, and the stall does not point at a node an earlier stall of it blamed: a
        second stall there goes on as without restarts (a retry without the node)."""
        if self.restarts <= 0:
            return False
        mine = attempts.of_segment(attempts.read_attempts(RunDir(self.run_dir).attempts, None),
                                   os.environ.get("SLURM_JOB_ID", ""), self.requeue)
        blamed = suspect is not None and suspect in attempts.blamed_nodes(mine)
        return attempts.restarts_spent(mine) < self.restarts and not blamed

    def _restart_watch(self, now: float) -> None:
        self.started, self.next_look = now, 0.0
        self.rhythm = OutputRhythm(self.outputs)
        self.cpu_seen.clear()

    def _flight(self, request: str, ranks: Sequence[int]) -> collectives.CollectiveView:
        """Every registered rank's flight record, asked for now (none asked: no rank)."""
        if not ranks:
            return collectives.CollectiveView()
        ask_flight_records(self.run_dir, request)
        return read_flight_records(self.run_dir, request, ranks, FLIGHT_WAIT_S)

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
    script = Path(os.environ.get("HPCTRAIN_SCRIPT") or RunDir(run_dir).script)
    done = _run(["sbatch", "--parsable", f"--exclude={node}", f"--dependency=afterany:{job}",
                 f"--export=ALL,HPCTRAIN_RETRIES_LEFT={left - 1}", str(script)])
    new = done.stdout.strip().split(";")[0] if done and done.returncode == 0 else ""
    if not new.isdigit():
        print(f"hpctrain monitor: the retry was not submitted: "
              f"{(done.stderr if done else '').strip()}", file=sys.stderr)
        return False
    with RunDir(run_dir).retries.open("a", encoding="utf-8") as fh:
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
    outputs = output_files([os.environ.get("HPCTRAIN_STDOUT", ""),
                            os.environ.get("HPCTRAIN_STDERR", "")], os.environ)
    return StallWatch(run_dir, node, os.environ.get("SLURM_PROCID", "0") == "0", nodes,
                      override, action, slurm_action, started,
                      nodes * _count("SLURM_GPUS_ON_NODE"), _count("HPCTRAIN_RETRIES_LEFT"),
                      outputs, _count("HPCTRAIN_RESTARTS"), _count("SLURM_RESTART_COUNT"))


def _count(*names: str) -> int:
    """The first of these variables that holds a whole number (0: none does)."""
    values = (os.environ.get(n, "") for n in names)
    return next((int(v) for v in values if v.isdigit()), 0)

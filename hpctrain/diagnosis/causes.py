"""Why a job ended (or waits): one diagnosis with its evidence and one fix.

Pure: an Evidence value in, a Diagnosis out. The rules are tried in order and the first that
applies wins; each one names the lines it stands on. Where nothing decides, the diagnosis says
so (`certain` False) and shows what was found: never a guess stated as a fact.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from hpctrain.diagnosis.logscan import Finding
from hpctrain.diagnosis.model import Diagnosis, Evidence, node_of, where
from hpctrain.diagnosis.pending import maintenance_in_way, pending_diagnosis
from hpctrain.monitor import stacks
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState
from hpctrain.values import rundir
from hpctrain.values.units import format_time

# Signals by number, as a researcher reads them.
SIGNALS = {1: "SIGHUP (hang-up)", 2: "SIGINT (interrupt)", 4: "SIGILL (illegal instruction)",
           6: "SIGABRT (abort: an assertion or a C++ exception)", 7: "SIGBUS (bus error)",
           8: "SIGFPE (arithmetic error)", 9: "SIGKILL (killed)",
           11: "SIGSEGV (segmentation fault)", 15: "SIGTERM (asked to stop)"}
# What srun prints when the batch script stops the monitor's step (USR2).
MONITOR_STOP_WORDS = "User defined signal 2"


def _first(ev: Evidence, *kinds: str) -> Finding | None:
    return next((f for f in ev.findings if f.kind in kinds), None)


def _failed_tasks(ev: Evidence) -> list[Finding]:
    """srun's reports of tasks that exited non-zero or were killed, but for the monitor's
    (the batch script stops it with USR2)."""
    return [f for f in ev.findings
            if (f.kind == "task_signal" and not (ev.monitored and f.info.get("what") ==
                                                 MONITOR_STOP_WORDS))
            or (f.kind == "task_exit" and f.info.get("exit_code") != "0")]


def _first_failed_task(ev: Evidence) -> Finding | None:
    return next(iter(_failed_tasks(ev)), None)


def _step_signal(ev: Evidence) -> int | None:
    """The first signal that ended one of the job's own steps (not the monitor's)."""
    steps = ev.accounting.steps() if ev.accounting else ()
    return next((s.signal for s in steps if s.signal and s.step != "extern"
                 and s.name != rundir.MONITOR_STEP), None)


def _with_task(ev: Evidence, found: Finding) -> tuple[str, ...]:
    task = _first_failed_task(ev)
    return (where(found),) + ((where(task),) if task is not None else ())


def _progress(ev: Evidence) -> tuple[int, int, float] | None:
    """(epochs done, epochs asked for, seconds per epoch) from metrics.json."""
    m = ev.metrics or {}
    done, total, times = m.get("epochs_completed"), m.get("max_epochs"), m.get("epoch_times_s")
    if not isinstance(done, int) or not isinstance(total, int) or not done:
        return None
    # Whole epochs as metrics.json timed them (the per-epoch list; else the summary's).
    seconds = [e.get("time_s") for e in m.get("epochs") or [] if isinstance(e, dict)]
    if not seconds and isinstance(times, list):
        seconds = times
    found = [float(t) for t in seconds if isinstance(t, (int, float))]
    return done, total, (sum(found) / len(found) if found else 0.0)


def _time_fix(ev: Evidence, last: Row) -> str:
    progress, limit = _progress(ev), last.time_limit_s
    if progress is None or not limit:
        return ("ask for more time (`--time`), or let hpctrain's trainer save and continue in "
                "a chain (`--chain 3`) or by requeueing")
    done, total, per = progress
    left = max(total - done, 0) * per
    need = math.ceil((limit + left) * 1.2 / 60) * 60
    segments = max(2, math.ceil((done / max(ev.chain, 1) + (total - done)) / max(done, 1)) + 1)
    return (f"`--time {format_time(need)}` (training had {done} of {total} epochs at about "
            f"{per:.0f} s each, {format_time(int(left))} left, plus 20 %), or "
            f"`--chain {segments}` to go on in segments of {format_time(limit)}")


def _time_limit(ev: Evidence, last: Row) -> Diagnosis | None:
    said = _first(ev, "time_limit")
    if last.state is not JobState.TIMEOUT and said is None:
        return None
    runs = len(ev.accounting.runs) if ev.accounting else 1
    progress = _progress(ev)
    got = f"; training reached epoch {progress[0]} of {progress[1]}" if progress else ""
    requeued = f" after {runs - 1} requeue(s)" if runs > 1 else ""
    return Diagnosis(
        "time_limit",
        f"the job ran out of its time limit ({format_time(last.time_limit_s or 0)}){requeued}"
        f"{got}", _time_fix(ev, last),
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, Elapsed "
                                     f"{format_time(last.elapsed_s or 0)}",
                                     where(said) if said else None))))


def _stopped(ev: Evidence, last: Row) -> Diagnosis | None:
    """The packaged trainer's safe stop: saved and stopped, and no requeue or segment after."""
    m = ev.metrics or {}
    ends = [r.get("end") for r in m.get("restarts") or [] if isinstance(r, dict)]
    end = ends[-1] if ends and isinstance(ends[-1], dict) else None
    if m.get("status") != "stopped" or end is None or last.state is not JobState.COMPLETED:
        return None
    reason = str(end.get("reason") or "")
    progress = _progress(ev)
    got = f" at epoch {progress[0]} of {progress[1]}" if progress else ""
    said = _first(ev, "warned_stop")
    warned = said is not None or reason == "SIGUSR1"
    return Diagnosis(
        "time_limit" if warned else "stopped",
        ("the trainer stopped at the time limit's warning" if warned else
         f"the trainer was asked to stop ({reason})") + f" and saved its checkpoint{got}; no "
        "requeue or later segment took the run up", _time_fix(ev, last) if warned else
        "submit the next part with `--chain N`, or let it requeue (`--requeue`, the default)",
        evidence=tuple(filter(None, (f"{rundir.METRICS}: status stopped, reason {reason}, "
                                     f"checkpoint {end.get('checkpoint')}",
                                     where(said) if said else None))))


def _node_peak(ev: Evidence) -> str:
    """The monitor's fullest node: its memory peak against its size (all of the node's
    processes, the job's among them), or that none was measured."""
    nodes = [n for n in (ev.monitor or {}).get("nodes") or []
             if n.get("mem_peak_mib") and n.get("mem_total_mib")]
    if not nodes:
        return "no peak measured"
    top = max(nodes, key=lambda n: n["mem_peak_mib"] / n["mem_total_mib"])
    return (f"{top['node']}'s memory peaked at {top['mem_peak_mib']:.0f} of "
            f"{top['mem_total_mib']:.0f} MiB in the monitor's samples")


def _host_memory(ev: Evidence, last: Row) -> Diagnosis | None:
    said = _first(ev, "host_oom")
    if last.state is not JobState.OUT_OF_MEMORY and said is None:
        return None
    peak = max((r.max_rss_mb or 0 for r in (ev.accounting.steps() if ev.accounting else ())),
               default=0) or None
    asked = last.req_mem_mb
    facts = f"{peak:.0f} MiB at the peak SLURM measured" if peak else _node_peak(ev)
    mem = f"`--mem {math.ceil((peak or asked or 0) * 1.5 / 1024)}G`" if (peak or asked) \
        else "more `--mem`"
    return Diagnosis(
        "host_memory",
        f"the job ran out of host memory ({facts}"
        f"{f' of {asked:.0f} MiB asked for' if asked else ''})",
        f"{mem}, or fewer data loader workers / a smaller batch per node",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}",
                                     where(said) if said else None))))


def _by_log(kind: str, summary: Callable[[Finding], str], fix: Callable[[Finding], str]
            ) -> Callable[[Evidence, Row], Diagnosis | None]:
    def rule(ev: Evidence, last: Row) -> Diagnosis | None:
        found = _first(ev, kind)
        if found is None:
            return None
        return Diagnosis(kind, summary(found), fix(found), evidence=_with_task(ev, found))
    return rule


def _frame_text(f: Finding) -> str:
    frame = f.user_frame()
    return f" in {frame.file}:{frame.line} ({frame.func})" if frame else ""


def _env_name(ev: Evidence) -> str:
    exe = (ev.environment or {}).get("executable")
    return str(exe or ev.python_env or "the job's python")


def _import_error(ev: Evidence, last: Row) -> Diagnosis | None:
    found = _first(ev, "import_error")
    if found is None:
        return None
    module = found.info.get("module", "?")
    return Diagnosis(
        "import_error",
        f"Python could not import `{module}`{_frame_text(found)}; the job ran {_env_name(ev)}",
        f"install `{module.split('.')[0]}` into that environment, or submit with "
        "`--python-env PATH` naming the environment that has it",
        evidence=_with_task(ev, found))


def _missing_file(ev: Evidence, last: Row) -> Diagnosis | None:
    found = _first(ev, "missing_file")
    if found is None:
        return None
    path = found.info.get("path", "?")
    relative = "" if path.startswith("/") else (
        "; a relative path is read from the job's working directory, the code snapshot, "
        "which holds only what git lists: name data with `--in-place PATH` or an absolute path")
    return Diagnosis(
        "missing_file", f"a file the job opened does not exist: `{path}`{_frame_text(found)}",
        f"check the path{relative}", evidence=_with_task(ev, found))


def _world(ev: Evidence) -> int | None:
    """The tasks of the job's own main step (not the batch script's, not the monitor's)."""
    steps = ev.accounting.steps() if ev.accounting else ()
    return max((s.tasks or 0 for s in steps if s.step not in ("batch", "extern")
                and s.name != rundir.MONITOR_STEP), default=0) or None


def _silent_ranks(ev: Evidence) -> str:
    """Which ranks never reached the collective: those that did not time out waiting."""
    waited = {int(f.rank) for f in ev.findings if f.kind == "collective_timeout" and f.rank
              and not f.info.get("peer_gone")}
    world = _world(ev)
    if not waited or not world:
        return ""
    silent = sorted(set(range(world)) - waited)
    if not silent:
        return "; every rank timed out waiting: the collective itself stalled (the network)"
    ranks = ", ".join(map(str, silent))
    return (f"; rank {ranks} never reached it (ranks {', '.join(map(str, sorted(waited)))} of "
            f"{world} timed out waiting)")


def _peer_gone(ev: Evidence, found: Finding) -> Diagnosis:
    """Ranks lost a peer whose process had ended, and no rank printed an error of its own:
    the first task that ended is the one to look at."""
    task = _first_failed_task(ev)
    first = (f"{task.node}'s task {task.task} ended first ({task.info.get('what')})"
             if task is not None else "a rank's process ended")
    return Diagnosis(
        "collective_timeout", f"{first}, without an error of its own in the log; the other "
        "ranks lost their peer (\"Connection closed by peer\"): a consequence, not the cause",
        "read the end of that rank's output (`hpctrain logs JOB`): a kill (memory, a signal) "
        "or an exit without a traceback; `hpctrain stats JOB` shows its node's memory",
        certain=False, evidence=_with_task(ev, found))


def _collective(ev: Evidence, last: Row) -> Diagnosis | None:
    found = _first(ev, "collective_timeout")
    if found is None:
        return None
    if all(f.info.get("peer_gone") for f in ev.findings if f.kind == "collective_timeout"):
        return _peer_gone(ev, found)
    world, joined = found.info.get("world"), found.info.get("joined")
    launch = (f"; only {joined} of {world} ranks joined: a launch mismatch (the world size "
              "asked for is not the one started)") if world and joined else ""
    return Diagnosis(
        "collective_timeout",
        f"a collective operation timed out: a rank hung or never joined{launch}"
        f"{_silent_ranks(ev)}",
        "look at what the silent rank was doing (its last lines; py-spy dump on its node); "
        "set a shorter timeout while debugging (the process group's `timeout`), and check "
        "that every node reaches MASTER_ADDR:MASTER_PORT",
        evidence=_with_task(ev, found))


def _gpu_fault(ev: Evidence, last: Row) -> Diagnosis | None:
    """A GPU or its driver failed: not the code's fault, and the node is the suspect. The
    others ranks' timeouts and exceptions that follow it are its consequences."""
    faults = [f for f in ev.findings if f.kind == "gpu_fault"]
    if not faults or last.state is JobState.COMPLETED:
        return None
    nodes = sorted({n for f in faults if (n := node_of(f, ev))})
    what = " / ".join(dict.fromkeys(f.info.get("what", "GPU error") for f in faults))
    on = f" on {', '.join(nodes)}" if nodes else ""
    keep = (f"hpctrain keeps {nodes[0]} out of your next submits (`hpctrain nodes`); "
            if len(nodes) == 1 else "")
    return Diagnosis(
        "gpu_fault", f"a GPU or its driver failed{on}: {what}; not the job's code",
        f"submit again ({keep}the run continues from its last checkpoint); tell the cluster's "
        "admins if it comes back, with the node and this line",
        evidence=tuple(where(f) for f in faults[:3]))


def _cuda_oom(f: Finding) -> str:
    return f"the GPU ran out of memory (it tried to allocate {f.info.get('size', '?')})"


def _rank_text(ev: Evidence, f: Finding) -> str:
    """`rank 3 on node2` (what is known of who printed `f`), or ''."""
    node = node_of(f, ev)
    who = " on ".join(x for x in (f"rank {f.rank}" if f.rank else None, node) if x)
    return f"{who} " if who else ""


def _consequences(ev: Evidence, cause: Finding) -> str:
    """What the other ranks said after `cause`: their lost peers and timeouts, named as its
    consequences (a rank that raises closes its connections; the others' collectives fail)."""
    after = [f for f in ev.findings if f.kind in ("collective_timeout", "launcher_summary")
             and (f.rank is None or f.rank != cause.rank)]
    ranks = sorted({f.rank for f in after if f.rank}, key=int)
    if not after:
        return ""
    who = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)}" if ranks else "the others"
    return (f"; {who} then lost {'their' if len(ranks) > 1 else 'its'} peer or timed out "
            "(\"Connection closed by peer\", a collective's timeout): consequences, not causes")


def _exception(ev: Evidence, last: Row) -> Diagnosis | None:
    """The first rank's own error: its traceback is the evidence, whatever its peers said."""
    found = _first(ev, "exception")
    if found is None:
        return None
    frame = found.user_frame()
    whose = ("hpctrain's" if frame and "/hpctrain/" in frame.file else "the job's")
    return Diagnosis(
        "exception",
        f"{_rank_text(ev, found)}{'raised' if found.rank else whose + ' code raised'} "
        f"{found.info.get('type')}: {found.info.get('message')}{_frame_text(found)}"
        f"{_consequences(ev, found)}",
        "fix the error at that line; `hpctrain logs JOB` shows the whole traceback"
        if frame else "the traceback has no frame outside the libraries; read it whole with "
        "`hpctrain logs JOB`", evidence=_with_task(ev, found))


def _usage(ev: Evidence, last: Row) -> Diagnosis | None:
    """The program's argument parser refused its command line (argparse's exit 2)."""
    found = _first(ev, "usage_error")
    if found is None or last.state is JobState.COMPLETED:
        return None
    return Diagnosis(
        "usage_error", f"{found.info.get('prog')} refused its command line: "
        f"{found.info.get('message')}",
        "give the flags the program takes (`python PROGRAM --help`); in a sweep, put each "
        "swept value where the program takes it: `--lr {lr}` (docs/sweeps.md)",
        evidence=_with_task(ev, found))


def _teardown(ev: Evidence, last: Row) -> Diagnosis | None:
    """A rank aborted in the process group's teardown, no rank having raised before it."""
    found = _first(ev, "teardown_abort")
    if found is None or last.state is JobState.COMPLETED:
        return None
    return Diagnosis(
        "teardown_race", "the ranks' work had ended; then a rank aborted while its process "
        "group was torn down (\"terminate called without an active exception\": gloo's "
        "teardown race, when a peer or the store's host has already gone): not your code's "
        "error", "hpctrain's rank hook prevents it (every rank meets the others, then ends "
        "without the teardown that races); it was off for this job (`-e "
        "HPCTRAIN_RANK_HOOK=off`, or hpctrain not importable by the job's python): submit "
        "again with it on, or end the "
        "script with `dist.barrier()` then `os._exit(0)` (docs/why.md, \"The teardown race\")",
        evidence=_with_task(ev, found))


def _signal(ev: Evidence, last: Row) -> Diagnosis | None:
    task = next((f for f in _failed_tasks(ev) if f.kind == "task_signal"), None)
    sig = last.signal or _step_signal(ev)
    if task is None and not sig:
        return None
    if sig:
        name = SIGNALS.get(sig, f"signal {sig}")
    else:
        name = task.info["what"] if task is not None else "a signal"
    return Diagnosis(
        "signal", f"a process of the job was ended by {name}",
        "a segmentation fault or abort points at a native library (a CUDA/NCCL or a "
        "compiled extension's version mismatch): run one rank alone to reproduce it",
        evidence=tuple(filter(None, (f"sacct: ExitCode {last.exit_code}:{last.signal}"
                                     + (f", a step ended by signal {sig}" if sig else ""),
                                     where(task) if task else None))))


def _stall_ranks(ev: Evidence) -> list[stacks.RankStack]:
    return stacks.ranks_of((ev.stall or {}).get("nodes") or [], ev.stall_stacks)


def _saved(ev: Evidence, last: Row) -> str:
    """What ending the job at the stall saved: its time left, and GPU-hours where known."""
    if not last.time_limit_s or last.elapsed_s is None:
        return ""
    left = max(last.time_limit_s - last.elapsed_s, 0)
    gpus = int((ev.stall or {}).get("gpus") or 0)
    hours = f", {gpus * left / 3600:.1f} GPU-hours" if gpus else ""
    return f", {format_time(left)} before its time limit{hours}"


def _at_exit(ev: Evidence, stack: stacks.RankStack) -> bool:
    """The rank's stack shows it in the rank hook's wait at its exit (its program had ended)."""
    text = ev.stall_stacks.get(stack.stack_file or "", "")
    return "rankhook" in text and "_meet" in text


def _by_stacks(ranks: list[stacks.RankStack]) -> tuple[str, str]:
    """What the stacks alone say: the ranks outside any collective, and the fix."""
    stuck, _ = stacks.stuck_ranks(ranks)
    frame = next((r.frame for r in stuck if r.frame), None)
    return stacks.describe(ranks), (
        f"look at rank {stuck[0].rank}'s code at {frame}: it never reached the collective "
        "the others waited in" if stuck and frame else "read every rank's stack (below); a "
        "collective every rank waited in points at the network or a node")


def _named_rank(ev: Evidence, found: dict[str, object], stack: stacks.RankStack
                ) -> tuple[str, str]:
    """The verdict that names a rank, with where that rank was, and the fix."""
    rank, frame = found.get("rank"), stack.frame
    at = f"; rank {rank} was in {frame}" if frame else ""
    if stack.worker_frame is not None:
        at += f", waiting for its data loader's worker, which was in {stack.worker_frame}"
        frame = stack.worker_frame
    if _at_exit(ev, stack):
        return (f"{found.get('text')}; rank {rank} had ended its work and waited for the "
                "others to end theirs (hpctrain's rank hook): it ran fewer collectives than "
                "they did", f"look for a collective that rank {rank} skips (a condition on "
                "the rank, an early `break` or `continue`): every rank must call each "
                "collective alike")
    return f"{found.get('text')}{at}", (
        f"look at rank {rank}'s code at {frame}: it never reached the collective the others "
        "waited in" if frame else "read the named rank's stack (below)")


def _stall_what(ev: Evidence, ranks: list[stacks.RankStack]) -> tuple[str, str]:
    """What the watcher's evidence says of the stall, and the fix: its verdict (the flight
    records, /proc, CPU use) with the named rank's frame; else the stacks, which name it."""
    found = (ev.stall or {}).get("verdict") or {}
    rank = found.get("rank")
    stack = next((r for r in ranks if r.rank == rank), None)
    frame = stack.frame if stack is not None else None
    if found.get("kind") == "mismatch":
        return (f"{found.get('text')}: an error in the program's code, not a hang of the "
                f"network" + (f" (rank {rank} was in {frame})" if frame else ""),
                "make every rank call each collective with tensors of one shape and type: "
                f"look at what rank {rank} passes" + (f" at {frame}" if frame else ""))
    if found.get("text") and stack is not None:
        return _named_rank(ev, found, stack)
    what, fix = _by_stacks(ranks)
    # A verdict without a rank (every rank idle; no flight recorder in this torch): the
    # stacks name the rank that never came.
    return (f"{found['text']}; {what}" if found.get("text") else what), fix


def _stalled(ev: Evidence, last: Row) -> Diagnosis | None:
    """The stall watcher found the job silent, and its ranks waiting: which rank, where."""
    if not ev.stall:
        return None
    ranks = _stall_ranks(ev)
    action = str(ev.stall.get("action") or "cancel")
    ended = {"cancel": f"hpctrain ended it{_saved(ev, last)}",
             "requeue": "hpctrain requeued it from its last checkpoint",
             "report": "hpctrain left it running (--on-stall report)",
             "retry": "hpctrain submitted it again without the suspect node"}.get(action, "")
    refused = _first(ev, "retry_refused")
    if refused is not None:
        ended += f"; the retry was not made (sbatch: {refused.info.get('why')})"
    what, fix = _stall_what(ev, ranks)
    by_output = ev.stall.get("source") == "output"
    silent = ("its output did not grow for" if by_output else "no rank progressed for")
    # A mismatch is the code's error, which the ranks then hung on: said as such.
    mismatch = ((ev.stall.get("verdict") or {}).get("kind") == "mismatch")
    headline = ("an error in the program's code, on which the job hung" if mismatch
                else "the job stalled")
    return Diagnosis(
        "collective_mismatch" if mismatch else "stalled",
        f"{headline}: {silent} {ev.stall.get('silent_s')} s (window "
        f"{ev.stall.get('window_s')} s); {what}; {ended}",
        fix + "; `--stall-window` sets the window, `--on-stall requeue` retries from the "
        "checkpoint", evidence=tuple(
            f"{rundir.STALL_DIR}/{r.stack_file}: rank {r.rank} on {r.node}"
            + ("" if by_output else f", last reported step {r.step}")
            for r in ranks if r.stack_file) + ((where(refused),) if refused else ()))


def _cancelled(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.CANCELLED:
        return None
    uid = last.cancelled_by_uid
    who = ev.user_names.get(uid, f"user id {uid}") if uid is not None else "someone"
    return Diagnosis(
        "cancelled", f"the job was cancelled by {who} at {last.end or '?'}",
        "submit it again if that was not meant; `hpctrain rerun JOB` runs the same code",
        evidence=(f"sacct: State {last.slurm_state}, End {last.end}",))


def _node_fail(ev: Evidence, last: Row) -> Diagnosis | None:
    said = _first(ev, "node_fail")
    if last.state is not JobState.NODE_FAIL and said is None:
        return None
    return Diagnosis(
        "node_failure", f"a node of the job failed ({last.node_list or '?'}): not the job's "
        "fault", "submit again (hpctrain's requeue takes it up from the last checkpoint when "
        "SLURM requeues it); report the node if it happens again",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, NodeList "
                                     f"{last.node_list}", where(said) if said else None))))


def _preempted(ev: Evidence, last: Row) -> Diagnosis | None:
    said = _first(ev, "preempted")
    if last.state is not JobState.PREEMPTED and said is None:
        return None
    return Diagnosis(
        "preempted", "a job of higher priority took the nodes (preemption)",
        "keep `--requeue` on (the default) so that it continues from its checkpoint, or use "
        "a partition or QOS that is not preempted",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}",
                                     where(said) if said else None))))


def _nonzero(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.FAILED:
        return None
    task = _first_failed_task(ev)
    code = last.exit_code
    return Diagnosis(
        "exit_code", f"the job's command exited with code {code} and printed no error "
        "hpctrain recognises", "read the end of its output (`hpctrain logs JOB`); an exit code "
        "is the program's own", certain=False,
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, ExitCode "
                                     f"{last.exit_code}:{last.signal}",
                                     where(task) if task else None))))


def _completed(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.COMPLETED:
        return None
    return Diagnosis("completed", "the job completed; nothing went wrong",
                     "see below what to ask for next time",
                     evidence=(f"sacct: State {last.slurm_state}, ExitCode 0",))


# Most specific first: what the logs name beats what the state says.
RULES: tuple[Callable[[Evidence, Row], Diagnosis | None], ...] = (
    _node_fail, _preempted, _stalled, _gpu_fault, _time_limit, _cancelled, _stopped, _completed,
    _host_memory,
    _by_log("cuda_oom", _cuda_oom, lambda f: "a smaller batch per GPU (`trainer.batch_size`, "
            "with `trainer.global_batch` to keep the global batch), or more GPUs"),
    _import_error, _missing_file, _usage, _exception, _teardown, _collective, _signal,
    _nonzero,
)


_HEADLINES = {"cuda_oom": "GPU out of memory", "teardown_race": "gloo's teardown race",
              "collective_mismatch": "mismatched collective",
              "usage_error": "command line refused", "host_memory": "out of host memory",
              "collective_timeout": "a collective timed out", "node_failure": "node failure",
              "preempted": "preempted", "stopped": "stopped, not taken up",
              "stalled": "stalled"}


def headline(d: Diagnosis, ev: Evidence, last: Row) -> str:
    """A few words of `d` for a table column."""
    found = _first(ev, d.cause)
    info = found.info if found else {}
    if d.cause == "exception":
        who = f"rank {found.rank}: " if found and found.rank else ""
        return f"{who}{info.get('type')}: {info.get('message')}"[:80]
    if d.cause == "import_error":
        return f"no module {info.get('module')}"
    if d.cause == "gpu_fault":
        return f"GPU fault: {info.get('what')}"
    if d.cause == "missing_file":
        return f"no file {info.get('path')}"
    if d.cause == "time_limit":
        progress = _progress(ev)
        return "time limit" + (f" at epoch {progress[0]}/{progress[1]}" if progress else "")
    if d.cause == "signal":
        sig = last.signal or _step_signal(ev)
        if sig:
            return SIGNALS.get(sig, f"signal {sig}").split(" ")[0]
        task = next((f for f in _failed_tasks(ev) if f.kind == "task_signal"), None)
        return task.info["what"] if task else "killed by a signal"
    if d.cause == "exit_code":
        return f"exit {last.exit_code}"
    if d.cause == "cancelled":
        return d.summary.removeprefix("the job was ").partition(" at ")[0]
    return _HEADLINES.get(d.cause, "")


def diagnose(ev: Evidence) -> Diagnosis:
    """The job's diagnosis; see RULES for the order."""
    last = ev.accounting.last if ev.accounting else None
    if ev.pending_reason is not None or (last and last.state is JobState.PENDING):
        reason = ev.pending_reason or (last.reason if last else None)
        limit = (last.time_limit_s if last else None) or ev.time_limit_s
        return pending_diagnosis(reason, ev.start_estimate,
                                 maintenance_in_way(reason, ev.maintenance, ev.now, limit),
                                 ev.now, limit)
    if last is None:
        return Diagnosis("unknown", f"SLURM's accounting has no record of job {ev.job_id}",
                         "check the job id; `hpctrain status` shows what hpctrain knows",
                         certain=False)
    if last.state in (JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED):
        return Diagnosis("running", f"the job is {last.state.value.lower()} "
                         f"({format_time(last.elapsed_s or 0)} of "
                         f"{format_time(last.time_limit_s or 0)})",
                         "ask again once it has ended", evidence=(f"sacct: State "
                                                                  f"{last.slurm_state}",))
    for rule in RULES:
        found = rule(ev, last)
        if found is not None:
            return dataclasses.replace(found, headline=headline(found, ev, last))
    return Diagnosis("unknown", f"the job ended {last.slurm_state}; nothing in its accounting "
                     "or logs says why", "read its output: `hpctrain logs JOB`", certain=False,
                     evidence=(f"sacct: State {last.slurm_state}",))

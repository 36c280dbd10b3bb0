"""The why rule of a stall: what the stall watcher's report and stacks (monitor/stall.py) say
of which rank hung where, and what its end saved."""

from __future__ import annotations

from hpctrain.diagnosis.facts import first
from hpctrain.diagnosis.model import Diagnosis, Evidence, where
from hpctrain.monitor import stacks
from hpctrain.slurm.accounting import Row
from hpctrain.values import rundir
from hpctrain.values.units import format_time


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


def stalled(ev: Evidence, last: Row) -> Diagnosis | None:
    """The stall watcher found the job silent, and its ranks waiting: which rank, where."""
    if not ev.stall:
        return None
    ranks = _stall_ranks(ev)
    action = str(ev.stall.get("action") or "cancel")
    ended = {"cancel": f"hpctrain ended it{_saved(ev, last)}",
             "requeue": "hpctrain requeued it from its last checkpoint",
             "report": "hpctrain left it running (--on-stall report)",
             "retry": "hpctrain submitted it again without the suspect node"}.get(action, "")
    refused = first(ev, "retry_refused")
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

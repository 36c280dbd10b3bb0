"""Why rules of ranks that failed together: a collective that timed out, a peer lost, gloo's
teardown race, a GPU fault; and the other ranks' errors named as a cause's consequences."""

from __future__ import annotations

from hpctrain.diagnosis.facts import first, first_failed_task, with_task
from hpctrain.diagnosis.logscan import Finding
from hpctrain.diagnosis.model import Diagnosis, Evidence, node_of, where
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState
from hpctrain.values import rundir


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
    task = first_failed_task(ev)
    first = (f"{task.node}'s task {task.task} ended first ({task.info.get('what')})"
             if task is not None else "a rank's process ended")
    return Diagnosis(
        "collective_timeout", f"{first}, without an error of its own in the log; the other "
        "ranks lost their peer (\"Connection closed by peer\"): a consequence, not the cause",
        "read the end of that rank's output (`hpctrain logs JOB`): a kill (memory, a signal) "
        "or an exit without a traceback; `hpctrain stats JOB` shows its node's memory",
        certain=False, evidence=with_task(ev, found))


def collective(ev: Evidence, last: Row) -> Diagnosis | None:
    found = first(ev, "collective_timeout")
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
        evidence=with_task(ev, found))


def consequences(ev: Evidence, cause: Finding) -> str:
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


def teardown(ev: Evidence, last: Row) -> Diagnosis | None:
    """A rank aborted in the process group's teardown, no rank having raised before it."""
    found = first(ev, "teardown_abort")
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
        evidence=with_task(ev, found))


def gpu_fault(ev: Evidence, last: Row) -> Diagnosis | None:
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

"""Bad nodes remembered: which node a job's failure points at, and which nodes are quarantined.

Pure: a diagnosis and what SLURM says of the job's nodes in, suspects out; suspects and a
clock in, the quarantine out. The history keeps the suspects (`hpctrain nodes` lists them);
a submit excludes the quarantined nodes of its cluster (docs/long-runs.md).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hpctrain.history import NodeSuspect
from hpctrain.slurm.hostlist import expand_nodes
from hpctrain.slurm.states import JobState

if TYPE_CHECKING:
    # Only for the suspects of a diagnosis: every submit reads the quarantine, not these.
    from hpctrain.diagnosis.model import Diagnosis, Evidence
    from hpctrain.monitor.stacks import Frame
    from hpctrain.slurm.accounting import Row

# How long a suspect stays quarantined after its latest evidence, unless the job asks otherwise
# (`HPCTRAIN_QUARANTINE_HOURS`, `hpctrain nodes clear`).
QUARANTINE_HOURS = 24.0
# SLURM node states that say the node itself is unwell, not busy.
_UNWELL = ("down", "drain", "fail", "not_responding", "no_respond", "unknown")
# A stall alone quarantines a node once this many different programs stalled on it: one
# program's own deadlock lands on the same node each time it runs there.
STALL_PROGRAMS = 2
# Where a frame's path is the standard library's (a full path; py-spy's short ones are judged
# by their top package).
_STDLIB_PATH = re.compile(r"/lib/python3[.\d]*/")
_PACKAGES_PATH = re.compile(r"(site-packages|dist-packages)/")
# Libraries a py-spy path names by its top package alone (`torch/cuda/__init__.py`).
_LIBRARIES = frozenset({
    "torch", "lightning", "pytorch_lightning", "lightning_fabric", "hpctrain", "numpy",
    "triton", "deepspeed", "transformers", "accelerate", "apex", "torchvision", "torchaudio",
    "datasets", "megatron", "jax", "jaxlib", "mpi4py", "h5py",
})


@dataclass(frozen=True)
class Quarantined:
    """A node kept from new jobs (or only watched), until when, and the jobs that put it there."""

    cluster: str
    node: str
    since: str
    until: str
    reasons: tuple[str, ...]
    jobs: tuple[str, ...]
    # False: only watched (a stall of one program points at it), not kept from jobs.
    held: bool = True

    def as_dict(self) -> dict[str, object]:
        return {"cluster": self.cluster, "node": self.node, "since": self.since,
                "until": self.until, "reasons": list(self.reasons), "jobs": list(self.jobs),
                "quarantined": self.held}


def needs_node_states(diagnosis: Diagnosis, ev: Evidence) -> bool:
    """Whether naming this job's suspects needs SLURM's node states (a node failed)."""
    return diagnosis.cause == "node_failure" or bool(_node_failed_runs(ev))


def suspects(diagnosis: Diagnosis, ev: Evidence, cluster: str,
             node_states: Mapping[str, str]) -> list[NodeSuspect]:
    """The nodes this ended job's failure points at (none where it points at none or all).
    A run SLURM requeued after a node failure counts too, though the job then completed."""
    found = [s for run in _node_failed_runs(ev)
             for s in _node_failure(ev, run.node_list, cluster, node_states)]
    if diagnosis.cause == "stalled":
        found += _stall_suspects(ev, cluster)
    elif diagnosis.cause == "gpu_fault":
        found += _gpu_fault_suspects(ev, cluster)
    elif diagnosis.cause == "node_failure" and not found:
        last = ev.accounting.last if ev.accounting else None
        said = next((f.node for f in ev.findings if f.kind == "node_fail" and f.node), None)
        found = _node_failure(ev, said or (last.node_list if last else None), cluster,
                              node_states)
    return list({(s.node, s.reason): s for s in found}.values())


def _node_failed_runs(ev: Evidence) -> list[Row]:
    return [r for r in (ev.accounting.runs if ev.accounting else ())
            if r.state is JobState.NODE_FAIL]


def _node_failure(ev: Evidence, node_list: str | None, cluster: str,
                  node_states: Mapping[str, str]) -> list[NodeSuspect]:
    nodes = expand_nodes(node_list)
    unwell = [n for n in nodes if any(w in node_states.get(n, "").lower() for w in _UNWELL)]
    # Without a node SLURM calls unwell, one node of a one-node job is still the one.
    picked = unwell or (nodes if len(nodes) == 1 else [])
    return [NodeSuspect(cluster=cluster, node=n, reason="node_failure", job_id=ev.job_id,
                        evidence=f"job {ev.job_id} ended NODE_FAIL; SLURM calls {n} "
                        f"{node_states.get(n, 'unknown')}") for n in picked]


def _gpu_fault_suspects(ev: Evidence, cluster: str) -> list[NodeSuspect]:
    """A GPU or driver error that the ranks of one node alone show points at that node."""
    from hpctrain.diagnosis.model import node_of

    faults = [f for f in ev.findings if f.kind == "gpu_fault"]
    nodes = {n for f in faults if (n := node_of(f, ev))}
    if len(nodes) != 1:
        return []
    node = nodes.pop()
    what = next(f.info.get("what", "") for f in faults if node_of(f, ev) == node)
    return [NodeSuspect(cluster=cluster, node=node, reason="gpu_fault", job_id=ev.job_id,
                        evidence=f"job {ev.job_id}: {what} on {node}")]


def _stall_suspects(ev: Evidence, cluster: str) -> list[NodeSuspect]:
    """A stall whose ranks outside the collective all live on one node and all sat in a
    library's code there (none in the user's) points at that node."""
    from hpctrain.monitor import stacks

    ranks = stacks.ranks_of((ev.stall or {}).get("nodes") or [], ev.stall_stacks)
    node = stacks.suspect_node(ranks)
    if node is None:
        return []
    stuck, _ = stacks.stuck_ranks(ranks)
    # The watcher's verdict of the program's own doing: a mismatched collective, a rank
    # stopped by a signal; a rank whose data loader's worker sat in the user's code; a rank
    # whose program had ended (in the rank hook's wait at its end: it skipped a collective).
    kind = ((ev.stall or {}).get("verdict") or {}).get("kind")
    if kind in ("mismatch", "stopped") or any(
            r.worker_frame is not None
            or "rankhook" in ev.stall_stacks.get(str(r.stack_file), "") for r in stuck):
        return []
    where = [_library_frame(ev.stall_stacks.get(str(r.stack_file), "")) for r in stuck]
    # A rank-specific deadlock (`if rank == 0:`) has every stuck rank on one node, so where
    # they stopped and not which node they were on tells hardware from code: a rank that sat
    # in the user's own line (or in no stack we could read) quarantines nothing.
    if not where or any(f is None for f in where):
        return []
    sat = "; ".join(f"rank {r.rank} sat in library code: {f}" for r, f in
                    zip(stuck, where, strict=True))
    return [NodeSuspect(cluster=cluster, node=node, reason="stall", job_id=ev.job_id,
                        evidence=f"job {ev.job_id} stalled: {stacks.describe(ranks)}; {sat}")]


def _owner(frame: Frame) -> str:
    """Whose code a frame is: 'user', 'stdlib' or 'library'."""
    path = frame.file
    if path.startswith("<frozen") or (_STDLIB_PATH.search(path)
                                       and not _PACKAGES_PATH.search(path)):
        return "stdlib"
    if not frame.users:
        return "library"
    if path.startswith("/"):
        return "user"
    # py-spy shortens a path to its topmost package (`torch/cuda/__init__.py`, `queue.py`).
    top = path.split("/", 1)[0].removesuffix(".py")
    if top in sys.stdlib_module_names:
        return "stdlib"
    return "library" if top in _LIBRARIES else "user"


def _library_frame(text: str) -> Frame | None:
    """The library frame a stuck rank sat in (None: it sat in the user's code, or no stack).

    The thread judged is the one with the user's code (the one that trains), else the first;
    its innermost frame decides, but the standard library's frames count as their caller's:
    a user's own `queue.get()`, `lock.acquire()` or `time.sleep()` is the user's code."""
    from hpctrain.monitor import stacks

    threads = stacks.parse_threads(text)
    if not threads:
        return None
    thread = next((t for t in threads if any(_owner(f) == "user" for f in t)), threads[0])
    decides = next((f for f in thread if _owner(f) != "stdlib"), None)
    if decides is None:
        return thread[0]  # only the standard library's frames: no user code on the stack
    return None if _owner(decides) == "user" else decides


def quarantined(found: Sequence[NodeSuspect], now: datetime, hours: float,
                programs: Mapping[tuple[str, str], str] | None = None) -> list[Quarantined]:
    """Each node with node evidence younger than `hours`: a NODE_FAIL or GPU fault at once, a
    stall once STALL_PROGRAMS different programs stalled there (`programs`: each job's)."""
    return [q for q in _standing(found, now, hours, programs or {}) if q.held]


def watched(found: Sequence[NodeSuspect], now: datetime, hours: float,
            programs: Mapping[tuple[str, str], str] | None = None) -> list[Quarantined]:
    """Each node that stalls of too few programs point at: watched, not quarantined."""
    return [q for q in _standing(found, now, hours, programs or {}) if not q.held]


def _standing(found: Sequence[NodeSuspect], now: datetime, hours: float,
              programs: Mapping[tuple[str, str], str]) -> list[Quarantined]:
    by_node: dict[tuple[str, str], list[NodeSuspect]] = {}
    for s in found:
        if datetime.fromisoformat(s.at) + timedelta(hours=hours) > now:
            by_node.setdefault((s.cluster, s.node), []).append(s)
    out = []
    for (cluster, node), items in sorted(by_node.items()):
        latest = max(datetime.fromisoformat(s.at) for s in items)
        stalled = {_program(s, programs) for s in items if s.reason == "stall"}
        held = len(stalled) >= STALL_PROGRAMS or any(s.reason != "stall" for s in items)
        out.append(Quarantined(cluster, node, min(s.at for s in items),
                               (latest + timedelta(hours=hours)).isoformat(timespec="seconds"),
                               tuple(dict.fromkeys(s.reason for s in items)),
                               tuple(dict.fromkeys(s.job_id for s in items if s.job_id)),
                               held))
    return out


def _program(s: NodeSuspect, programs: Mapping[tuple[str, str], str]) -> str:
    """What the suspect's job ran; its job (or its evidence) where the history does not say."""
    return programs.get((s.cluster, s.job_id or ""), f"job {s.job_id or s.id}")


def stall_jobs(found: Sequence[NodeSuspect]) -> list[str]:
    """The jobs whose programs decide a quarantine: those of nodes that only stalls of
    several jobs point at (none, and so no history read, on most submits)."""
    by_node: dict[tuple[str, str], set[str]] = {}
    other = {(s.cluster, s.node) for s in found if s.reason != "stall"}
    for s in found:
        if s.reason == "stall" and s.job_id and (s.cluster, s.node) not in other:
            by_node.setdefault((s.cluster, s.node), set()).add(s.job_id)
    return sorted({j for jobs in by_node.values() if len(jobs) >= STALL_PROGRAMS
                   for j in jobs})


def program_of(command: Sequence[str]) -> str:
    """What a command runs, without its arguments: its script (`train.py`), its module
    (`-m pkg.train`), else its first word; one program's runs with other options are one."""
    words = list(command)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return f"-m {words[i + 1]}"
        if word.endswith((".py", ".sh")):
            return word
    return words[0] if words else ""


def quarantine_hours(text: str | None) -> float:
    """`HPCTRAIN_QUARANTINE_HOURS` (0 turns the quarantine off); the default where unset."""
    try:
        value = float(text) if text else QUARANTINE_HOURS
    except ValueError:
        return QUARANTINE_HOURS
    return max(value, 0.0)

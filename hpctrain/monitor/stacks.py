"""A stall's stacks read as values: which rank waited in which collective, which never came.

Pure: the text py-spy's `dump` or faulthandler wrote for each rank in, frames and a verdict
out. Both list the innermost frame first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# torch.distributed's collectives and point-to-point calls, by the Python function's name.
COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_to_all",
    "all_to_all_single", "barrier", "monitored_barrier", "broadcast", "broadcast_object_list",
    "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather", "gather_object", "scatter",
    "scatter_object_list", "send", "recv", "isend", "irecv", "batch_isend_irecv",
})
# Where a frame is a library's, not the user's.
# py-spy without --full-filenames (an older dump) writes a package's file from its top
# package on: "torch/distributed/distributed_c10d.py".
_LIBRARY = re.compile(r"(site-packages|dist-packages|/lib/python3[.\d]*/|^<frozen|"
                      r"(^|/)(torch|lightning|lightning_fabric|pytorch_lightning|hpctrain)/)")
_PY_SPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.+?)\s*$')
_THREAD = re.compile(r"^(Thread |Current thread |Process )")


@dataclass(frozen=True)
class Frame:
    """One frame of a rank's stack as py-spy dumped it."""

    func: str
    file: str
    line: int | None

    @property
    def collective(self) -> bool:
        return self.func in COLLECTIVES and "distributed" in self.file

    @property
    def users(self) -> bool:
        return not _LIBRARY.search(self.file)

    def __str__(self) -> str:
        short = self.file.rsplit("/", 1)[-1]
        return f"{self.func} ({short}:{self.line})" if self.line else f"{self.func} ({short})"


def parse_threads(text: str) -> list[list[Frame]]:
    """Each thread's frames, innermost first, from py-spy's or faulthandler's dump."""
    threads: list[list[Frame]] = []
    for raw in text.splitlines():
        if _THREAD.match(raw):
            threads.append([])
            continue
        found = _FAULT_FRAME.match(raw) or _PY_SPY_FRAME.match(raw)
        if found is None or not threads:
            continue
        line = found.group("line")
        threads[-1].append(Frame(found.group("func"), found.group("file"),
                                 int(line) if line else None))
    return [t for t in threads if t]


@dataclass(frozen=True)
class RankStack:
    """A hung rank's stack: the collective it waited in, its innermost frame of user code."""

    rank: int
    node: str
    step: int
    collective: str | None  # the collective it waited in (None: it was not in one)
    frame: Frame | None  # its innermost frame of the user's code
    stack_file: str | None
    # Where it waited for its data loader: the worker process's innermost frame of user code.
    worker_frame: Frame | None = None


def _processes(text: str) -> list[str]:
    """py-spy's dump with --subprocesses, one text a process (the rank's own first)."""
    chunks: list[list[str]] = [[]]
    for raw in text.splitlines():
        if raw.startswith("Process ") and any(chunks[-1]):
            chunks.append([])
        chunks[-1].append(raw)
    return ["\n".join(c) for c in chunks]


def read_rank(row: Mapping[str, Any], text: str | None) -> RankStack:
    """One rank of a node's stall view, with its stack's text (None: none was collected)."""
    own, *children = _processes(text or "")
    threads = parse_threads(own)
    frames = [f for t in threads for f in t]
    waiting = next((f.func for f in frames if f.collective), None)
    # The thread with the user's code is the one that trains (others are Lightning's, gloo's).
    users = next((f for t in threads for f in t if f.users), None)
    worker = None
    if any("/torch/utils/data/" in f.file for f in frames):
        worker = next((f for child in children for t in parse_threads(child) for f in t
                       if f.users), None)
    return RankStack(int(row["rank"]), str(row["node"]), int(row.get("step") or 0), waiting,
                     users, row.get("stack"), worker)


def stuck_ranks(ranks: Sequence[RankStack]) -> tuple[list[RankStack], list[RankStack]]:
    """(ranks outside any collective, ranks waiting in one), of those with a stack."""
    known = [r for r in ranks if r.stack_file]
    return ([r for r in known if r.collective is None],
            [r for r in known if r.collective is not None])


def _numbers(ranks: Sequence[RankStack]) -> str:
    return ", ".join(str(r.rank) for r in ranks)


def describe(ranks: Sequence[RankStack]) -> str:
    """`rank 1 on node2 never entered a collective; it was in sleepy (train.py:12); ranks 0
    waited in all_reduce`, or what is known where the stacks do not decide."""
    stuck, waiting = stuck_ranks(ranks)
    if not stuck and not waiting:
        return "no rank's stack could be collected"
    collectives = sorted({r.collective for r in waiting if r.collective})
    waited = (f"rank{'s' if len(waiting) > 1 else ''} {_numbers(waiting)} waited in "
              f"{' / '.join(collectives)}") if waiting else ""
    if not stuck:
        return f"every rank waited in a collective ({waited}): the collective itself hung"
    parts = []
    for r in stuck:
        where = f"; it was in {r.frame}" if r.frame else ""
        parts.append(f"rank {r.rank} on {r.node} never entered a collective{where}")
    return "; ".join(parts) + (f"; {waited}" if waited else "")


def ranks_of(views: Sequence[Any], texts: Mapping[str, str]) -> list[RankStack]:
    """Every rank of a stall report's node views, each with its stack's text by file name."""
    return [read_rank(row, texts.get(str(row.get("stack"))) if row.get("stack") else None)
            for view in views if isinstance(view, dict)
            for row in view.get("ranks") or [] if isinstance(row, dict)]


def suspect_node(ranks: Sequence[RankStack]) -> str | None:
    """The one node whose ranks never entered the collective the others waited in (None: no
    rank waited, or the stuck ranks live on several nodes)."""
    stuck, waiting = stuck_ranks(ranks)
    nodes = {r.node for r in stuck}
    return nodes.pop() if len(nodes) == 1 and waiting else None

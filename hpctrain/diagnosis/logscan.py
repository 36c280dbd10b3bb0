"""What a job's logs say about how it ended: each telling line as a Finding, with where it is.

Pure: text in, findings out. The patterns are the words the programs print (Python, srun and
slurmstepd, PyTorch, NCCL, gloo, the kernel, hpctrain's batch script); docs/why.md lists them
and tests/diagnosis/recorded holds real examples, each with where it came from.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from hpctrain.values.srunlines import SRUN_TASK

# slurmstepd: "*** JOB 12 ON node1 CANCELLED AT 2026-11-24T10:00:00 DUE TO TIME LIMIT ***"
_STEPD = re.compile(r"\*\*\* (?:JOB|STEP) (?P<id>[\d.]+\w*) ON (?P<node>\S+) CANCELLED AT "
                    r"(?P<at>\S+)(?: DUE TO (?P<why>[A-Z ]+?))?(?: \*\*\*|$)")
# srun: "srun: error: node2: task 1: Exited with exit code 3" / ": Segmentation fault"
_EXIT = re.compile(r"Exited with exit code (\d+)")
_OOM_KILL = re.compile(r"oom[-_]kill|Out of memory: Killed process|OOM Killed",
                       re.IGNORECASE)
_CUDA_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B)")
_COLLECTIVE = re.compile(
    r"Watchdog caught collective operation timeout|"
    r"Timed out waiting \d+ ?ms for (?:recv|send) operation|"
    r"ProcessGroupGloo.*[Tt]imed out|Connection closed by peer|"
    r"timed out .*(?:store_based_barrier|initializing process group)|"
    r"Timed out initializing process group")
# A GPU or its driver failing, not the job's code (NVIDIA's Xid catalogue files these under
# hardware, driver or "reset the GPU"): CUDA's error strings as PyTorch and NCCL print them,
# the kernel's NVRM lines. Not an illegal address or a device-side assert: those are the code's.
_GPU_FAULT = (
    ("uncorrectable ECC error", re.compile(r"uncorrectable ECC error|ECC_UNCORRECTABLE|"
                                           r"cudaErrorECCUncorrectable")),
    ("GPU fell off the bus", re.compile(r"fallen off the bus")),
    ("uncorrectable NVLink error", re.compile(r"uncorrectable NVLink error|"
                                              r"cudaErrorNvlinkUncorrectable")),
    ("GPU lost", re.compile(r"GPU is lost|GPU has been lost")),
    ("unspecified launch failure", re.compile(r"unspecified launch failure")),
    ("CUDA unknown error", re.compile(r"Cuda failure 999|CUDA error: unknown error|"
                                      r"cudaErrorUnknown")),
    ("GPU busy or unavailable", re.compile(r"CUDA-capable device\(s\) (?:is|are) busy or "
                                           r"unavailable")),
    ("no GPU visible", re.compile(r"no CUDA-capable device is detected")),
    ("driver older than CUDA", re.compile(r"CUDA driver version is insufficient")),
    ("Xid", re.compile(r"NVRM: Xid \(")),
)
# "host:pid:tid [gpu] ... NCCL WARN ...": the host is NCCL's own prefix. "[Rank 3]" in a
# watchdog's message names the rank.
_NCCL_HOST = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] ")
_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)\]")
_XID = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")
_JOINED = re.compile(r"world_size=(?P<world>\d+), num_workers_joined=(?P<joined>\d+)|"
                     r"(?P<joined2>\d+)/(?P<world2>\d+) clients joined")
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|"
                  r"[A-Za-z_][\w.]*\.[A-Z]\w*):? ?(?P<msg>.*)$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_NO_MODULE = re.compile(r"No module named '(?P<name>[^']+)'")
_NO_FILE = re.compile(r"\[Errno 2\] No such file or directory: '(?P<path>[^']*)'")
_REQUEUE = re.compile(r"^hpctrain: checkpoint saved before the time limit; requeueing")
# A C++ std::thread destroyed while still running: with gloo, a rank whose peers (or the store's
# host) are gone as it tears its process group down aborts so (docs/why.md, "The teardown race").
_TEARDOWN = re.compile(r"^terminate called without an active exception")
# A peer's process ended under a rank waiting on it: a consequence, not a cause.
_PEER_GONE = re.compile(r"Connection closed by peer|Connection reset by peer|"
                        r"remote worker crash|Broken pipe")
# argparse's refusal of the command line: "train.py: error: unrecognized arguments: lr=0.1".
_USAGE = re.compile(r"^(?P<prog>\S+): error: (?P<msg>(?:unrecognized arguments|the following "
                    r"arguments are required|argument \S+|invalid choice|ambiguous option|"
                    r"expected one argument).*)$")
# hpctrain's stall watcher could not submit the retry it was asked for (--retries).
_RETRY_REFUSED = re.compile(r"^hpctrain monitor: the retry was not submitted: (?P<why>.*)$")
_WARNED_STOP = re.compile(r"^hpctrain: the time limit's warning came: checkpoint saved")
# A rank's container could not start (docs/containers.md): ch-run's own error line (recorded:
# tests/diagnosis/recorded/charliecloud-0.31) and the batch script's checks before the launch.
_CH_RUN = re.compile(r"^ch-run\[\d+\]: error: (?P<msg>.*?)(?: \(\S+\.c:\d+(?: \d+)?\))?$")
_CH_RUN_WHAT = (
    ("image_missing", re.compile(r"^can't stat: (?P<path>.*): No such file or directory$")),
    ("bind_missing", re.compile(r"^can't bind: source not found: (?P<path>.*)$")),
    ("bind_target_missing", re.compile(r"^can't mkdir: (?P<path>.*): Read-only file system$")),
    ("command_missing", re.compile(r"^can't execve\(2\): (?P<path>.*): No such file or "
                                   r"directory$")),
    ("user_unset", re.compile(r"^\$USER not set$")),
)
_CONTAINER_CHECK = re.compile(r"^hpctrain: container (?:(?P<image>image)|runtime (?P<prog>\S+)) "
                              r"not found on (?P<node>[^:\s]+)(?:: (?P<path>.*))?$")
# A word each line pattern needs (found in the whole text at C speed, so that the patterns
# run on a few lines, not on a chatty run's 20,000 lines of progress).
_WORDS = ("***", "srun: error", "out of memory", "Out Of Memory", "oom", "OOM", "Watchdog",
          "imed out", "Connection closed", "hpctrain: ", "hpctrain monitor: ", "ECC",
          "fallen off", "NVLink", "GPU is lost", "GPU has been lost", "launch failure",
          "Cuda failure 999", "unknown error", "cudaError", "CUDA-capable", "insufficient",
          "NVRM: Xid", "terminate called", ": error: ", "retry was not", "ch-run[")
# The batch script's monitor step says so as it ends: its USR2 is then hpctrain's own.
_MONITOR = re.compile(r"^hpctrain monitor: ")
# Lines other programs write into the same file while a traceback is being printed (stderr is
# shared; srun reports the task's exit before Python has flushed its last lines).
_INTERJECTION = re.compile(r"^(?:srun|slurmstepd|hpctrain[\w ]*): ")
# PyTorch's distributed runs prefix each rank's error output: "[rank3]: Traceback ...".
_RANK = re.compile(r"^\[rank(\d+)\]:\s?")
# What a launcher raises once a worker has failed (torchrun's summary, the agent's signal):
# the worker's own error is the cause.
_LAUNCHER_SUMMARIES = ("ChildFailedError", "SignalException", "ProcessExitedException",
                       "ProcessRaisedException")
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "<string>")


@dataclass(frozen=True)
class Frame:
    """One frame of a Python traceback found in a log."""

    file: str
    line: int
    func: str

    @property
    def is_library(self) -> bool:
        return any(part in self.file for part in _LIBRARY)


@dataclass(frozen=True)
class Finding:
    """One telling line (or block) of a log: what it is, where, and what it says."""

    kind: str
    source: str
    line_no: int
    text: str
    node: str | None = None
    task: str | None = None
    info: dict[str, str] = field(default_factory=dict)
    rank: str | None = None
    frames: tuple[Frame, ...] = ()

    def user_frame(self) -> Frame | None:
        """The innermost frame of the user's (or hpctrain's) code, not a library's."""
        return next((f for f in reversed(self.frames) if not f.is_library), None)


def _stepd(m: re.Match[str], source: str, n: int, line: str) -> Finding:
    why = (m.group("why") or "").strip()
    kind = {"TIME LIMIT": "time_limit", "PREEMPTION": "preempted",
            "NODE FAILURE": "node_fail"}.get(why, "cancelled")
    return Finding(kind, source, n, line.strip(), node=m.group("node"),
                   info={"at": m.group("at"), "why": why, "id": m.group("id")})


def _srun(m: re.Match[str], source: str, n: int, line: str) -> Finding:
    what = m.group("what").strip()
    code = _EXIT.search(what)
    info = {"what": what} | ({"exit_code": code.group(1)} if code else {})
    kind = "task_exit" if code else "host_oom" if what == "Out Of Memory" else "task_signal"
    return Finding(kind, source, n, line.strip(), node=m.group("node"), task=m.group("task"),
                   info=info)


def gpu_fault(text: str) -> str | None:
    """What GPU or driver failure `text` names, in a few words (None: none)."""
    names = [name for name, pattern in _GPU_FAULT if pattern.search(text)]
    if "Xid" in names and (m := _XID.search(text)):
        said = [n for n in names if n != "Xid"]
        return f"Xid {m.group(1)}" + (f" ({said[0]})" if said else "")
    return names[0] if names else None


def _gpu_finding(line: str, source: str, n: int, what: str) -> Finding:
    host = _NCCL_HOST.match(line)
    rank = _RANK_IN_TEXT.search(line)
    return Finding("gpu_fault", source, n, line.strip(), node=host.group("host") if host else None,
                   info={"what": what}, rank=rank.group(1) if rank else None)


def _line_finding(line: str, source: str, n: int) -> Finding | None:
    """A finding from one line, or None."""
    if what := gpu_fault(line):
        return _gpu_finding(line, source, n, what)
    if m := _STEPD.search(line):
        return _stepd(m, source, n, line)
    if m := SRUN_TASK.search(line):
        return _srun(m, source, n, line)
    if m := _CUDA_OOM.search(line):
        return Finding("cuda_oom", source, n, line.strip(), info={"size": m.group("size")})
    if _OOM_KILL.search(line):
        return Finding("host_oom", source, n, line.strip())
    if _COLLECTIVE.search(line):
        j = _JOINED.search(line)
        info = {}
        if j:
            info = {"world": j.group("world") or j.group("world2"),
                    "joined": j.group("joined") or j.group("joined2")}
        if _PEER_GONE.search(line):
            info["peer_gone"] = "1"
        return Finding("collective_timeout", source, n, line.strip(), info=info)
    if _REQUEUE.search(line):
        return Finding("requeued", source, n, line.strip())
    if _TEARDOWN.search(line):
        return Finding("teardown_abort", source, n, line.strip())
    if m := _USAGE.search(line):
        return Finding("usage_error", source, n, line.strip(),
                       info={"prog": m.group("prog"), "message": m.group("msg")})
    if m := _RETRY_REFUSED.search(line):
        return Finding("retry_refused", source, n, line.strip(), info={"why": m.group("why")})
    if _WARNED_STOP.search(line):
        return Finding("warned_stop", source, n, line.strip())
    if _MONITOR.search(line):
        return Finding("monitor", source, n, line.strip())
    return _container_finding(line, source, n)


def _container_finding(line: str, source: str, n: int) -> Finding | None:
    """A container that could not start a rank: what went wrong, and the path it names."""
    if m := _CONTAINER_CHECK.match(line.strip()):
        what = "image_missing" if m.group("image") else "runtime_missing"
        info = {"what": what, "path": m.group("path") or m.group("prog") or ""}
        return Finding("container", source, n, line.strip(), node=m.group("node"), info=info)
    if m := _CH_RUN.match(line.strip()):
        msg = m.group("msg")
        for what, pattern in _CH_RUN_WHAT:
            if said := pattern.match(msg):
                return Finding("container", source, n, line.strip(), info={
                    "what": what, "path": said.groupdict().get("path") or "", "runtime": "ch-run"})
        return Finding("container", source, n, line.strip(),
                       info={"what": "other", "path": msg, "runtime": "ch-run"})
    return None


def _traceback(lines: list[tuple[int, str]], start: int, source: str
               ) -> tuple[Finding | None, int]:
    """The traceback starting at lines[start]: its frames and exception line; the next index."""
    frames: list[Frame] = []
    interleaved = False
    i = start + 1
    while i < len(lines):
        n, line = lines[i]
        if m := _FRAME.match(line):
            frames.append(Frame(m.group("file"), int(m.group("line")), m.group("func").strip()))
        elif _INTERJECTION.match(line):
            pass
        elif line.startswith("Traceback (most recent call last)"):
            # Another rank's traceback, its lines mixed with this one's (ranks that share a
            # log without a prefix): the frames of both are read as one call chain.
            interleaved = True
        elif not line.startswith((" ", "\t")) and line.strip():
            m = _EXC.match(line.strip())
            if m is None:
                return None, i
            chain = list(dict.fromkeys(frames)) if interleaved else frames
            return _exception(m, chain, source, n, line), i + 1
        i += 1
    return None, i


def _exception(m: re.Match[str], frames: list[Frame], source: str, n: int, line: str
               ) -> Finding:
    kind, msg = m.group("type"), m.group("msg").strip()
    info = {"type": kind, "message": msg}
    found = "exception"
    if (mod := _NO_MODULE.search(msg)) and kind.endswith(("ModuleNotFoundError",
                                                          "ImportError")):
        found, info["module"] = "import_error", mod.group("name")
    elif (path := _NO_FILE.search(msg)) and kind.endswith("FileNotFoundError"):
        found, info["path"] = "missing_file", path.group("path")
    elif cuda := _CUDA_OOM.search(msg):
        found, info["size"] = "cuda_oom", cuda.group("size")
    elif what := gpu_fault(msg):
        found, info["what"] = "gpu_fault", what
    elif _COLLECTIVE.search(msg):
        found = "collective_timeout"
        if _PEER_GONE.search(msg):
            info["peer_gone"] = "1"
    elif kind.rsplit(".", 1)[-1] in _LAUNCHER_SUMMARIES:
        found = "launcher_summary"
    return Finding(found, source, n, line.strip(), info=info, frames=tuple(frames))


def _candidate_lines(text: str) -> set[int]:
    """The indexes of the lines that hold one of _WORDS."""
    hits = sorted(pos for word in _WORDS for pos in _positions(text, word))
    found, line, last = set(), 0, 0
    for pos in hits:
        line += text.count("\n", last, pos)
        last = pos
        found.add(line)
    return found


def _positions(text: str, word: str) -> list[int]:
    out, pos = [], text.find(word)
    while pos != -1:
        out.append(pos)
        pos = text.find(word, pos + 1)
    return out


def _scan_stream(lines: list[tuple[int, str]], source: str, rank: str | None,
                 candidates: set[int], first_line: int) -> list[Finding]:
    found: list[Finding] = []
    i = 0
    while i < len(lines):
        n, line = lines[i]
        if line.startswith("Traceback (most recent call last)"):
            start = i
            hit, i = _traceback(lines, i, source)
            # What srun and others wrote in between is read too.
            found += [f for n2, l2 in lines[start + 1:i] if _INTERJECTION.match(l2)
                      and (f := _line_finding(l2, source, n2)) is not None]
        else:
            hit = _line_finding(line, source, n) if n - first_line in candidates else None
            i += 1
        if hit is not None:
            found.append(dataclasses.replace(hit, rank=rank) if rank is not None else hit)
    return found


def scan(text: str, source: str, first_line: int = 1) -> list[Finding]:
    """Every finding in `text` (a log, or its tail starting at line `first_line`), in the
    order the lines came. Lines a rank prefixed are read as that rank's own stream, so that
    the tracebacks of several ranks, interleaved, each stay whole."""
    streams: dict[str | None, list[tuple[int, str]]] = {}
    # Split on "\n" only, as _candidate_lines counts (splitlines also splits on \r, \f, ...).
    for i, raw in enumerate(text.split("\n")):
        m = _RANK.match(raw)
        rank, line = (m.group(1), raw[m.end():]) if m else (None, raw)
        streams.setdefault(rank, []).append((first_line + i, line))
    candidates = _candidate_lines(text)
    found = [f for rank, lines in streams.items()
             for f in _scan_stream(lines, source, rank, candidates, first_line)]
    return sorted(found, key=lambda f: f.line_no)

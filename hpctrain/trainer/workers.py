"""One import per node: under `--launcher per-node` the trainer starts the node's ranks itself.

srun starting one trainer per rank makes every rank import torch and Lightning at once: on a
node where ranks outnumber free cores, or on a shared file system, that is most of a short job
(`benchmarks/node_imports.py`: 4 ranks on 2 cores 5.9 s, against 2.6 s for one import and a fork
per rank). Here srun starts one trainer per node (the per-node launcher's NODE_RANK,
LOCAL_WORLD_SIZE, WORLD_SIZE); it imports once, then forks LOCAL_WORLD_SIZE workers that each
find torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), and
waits for them: signals go on to the workers, a failing worker ends its siblings, and the node's
exit status is the first failure's, else 75 (a safe stop), else 0.

CUDA must not have started before a fork: a child of a process that initialised it cannot use
it. The parent asks NVML, not the CUDA driver, whether there are GPUs
(PYTORCH_NVML_BASED_CUDA_CHECK, set before torch is imported), and where CUDA has started
anyway (torch initialised it, or the driver library is loaded) the workers are started as new
processes instead: each imports again, as under srun, and the job runs the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hpctrain.errors import ConfigError, HpctrainError
from hpctrain.trainer.cluster import NODE_WORKER_VAR
from hpctrain.trainer.signals import EXIT_REQUEUE

# Signals the node's trainer passes on to its workers (SLURM's stop and warning signals, ^C).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
# Seconds a failing worker's siblings get to end on SIGTERM before SIGKILL (they may be blocked
# in a collective that the failed rank will never join).
SIBLING_GRACE_S = 10.0
_POLL_S = 0.1


@dataclass(frozen=True)
class NodeLaunch:
    """This node's place in a per-node launch: which node, of how many, with how many workers."""

    node_rank: int
    nodes: int
    workers: int

    def worker_env(self, local_rank: int) -> dict[str, str]:
        """What worker `local_rank` finds: torchrun's variables for it."""
        return {
            "RANK": str(self.node_rank * self.workers + local_rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(self.nodes * self.workers),
            "LOCAL_WORLD_SIZE": str(self.workers),
            "GROUP_RANK": str(self.node_rank),
            # Its layout is torchrun's; its launch (the log, metrics.json) per-node.
            NODE_WORKER_VAR: "1",
        }


class WorkersFailed(HpctrainError):
    """A worker of this node failed; the others were ended."""

    def __init__(self, what: str, exit_code: int) -> None:
        super().__init__(what, "its own error is above; the job's log has every rank's")
        self.exit_code = exit_code


def node_launch(env: Mapping[str, str]) -> NodeLaunch | None:
    """The per-node launch this process is the node's trainer of, or None: it is one rank
    already (RANK is set: srun's wrapper, torchrun, a worker) or was not launched per node."""
    if "RANK" in env or "NODE_RANK" not in env or "LOCAL_WORLD_SIZE" not in env:
        return None
    node, workers = _count(env, "NODE_RANK", 0), _count(env, "LOCAL_WORLD_SIZE", 1)
    nodes = _count(env, "NNODES", 1) if env.get("NNODES") else node + 1
    if node >= nodes:
        raise ConfigError(f"NODE_RANK={node} is not below NNODES={nodes}",
                          "run it with hpctrain's --launcher per-node, which sets both")
    world = env.get("WORLD_SIZE")
    if world is not None and world != str(nodes * workers):
        raise ConfigError(
            f"WORLD_SIZE={world} is not NNODES={nodes} x LOCAL_WORLD_SIZE={workers}",
            "run it with hpctrain's --launcher per-node, which sets all three")
    return NodeLaunch(node, nodes, workers)


def _count(env: Mapping[str, str], name: str, least: int) -> int:
    raw = env.get(name, "")
    if not raw.isdigit() or int(raw) < least:
        raise ConfigError(f"{name}={raw!r} is not a whole number of at least {least}",
                          "run it with hpctrain's --launcher per-node, which sets it")
    return int(raw)


def before_imports() -> None:
    """Ask NVML, not the CUDA driver, whether GPUs exist: the driver's answer would start CUDA
    in this process before its workers exist (torch's documented fork-safe check)."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def cuda_started() -> str | None:
    """Why a forked worker could not use CUDA (torch or the driver already started it), or None."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "torch has initialised CUDA"
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            if any("libcuda.so" in line for line in f):
                return "the CUDA driver library is loaded"
    except OSError:
        pass
    return None


def combined(codes: Sequence[int]) -> int:
    """The node's exit status from its workers' (in the order they ended; a signal as -N)."""
    for code in codes:
        if code not in (0, EXIT_REQUEUE):
            return 128 - code if code < 0 else code
    return EXIT_REQUEUE if EXIT_REQUEUE in codes else 0


def run_node(launch: NodeLaunch, work: Callable[[], None], spawn_argv: Sequence[str]) -> int:
    """Start this node's workers and wait for them; their combined exit status.

    `work` runs in each forked worker and ends it with the worker's exit status; `spawn_argv`
    starts a worker as a new process instead, where a fork would find CUDA started."""
    unsafe = cuda_started()
    if unsafe:
        print(f"hpctrain: {unsafe}, so this node's {launch.workers} workers start as new "
              "processes (each imports again) instead of forks", file=sys.stderr, flush=True)
    starter = _spawner(spawn_argv) if unsafe else _forker(work)
    alive: dict[int, int] = {}
    held: list[int] = []  # signals that came while the workers were being started

    def forward(signum: int, frame: object) -> None:
        if len(alive) < launch.workers:
            held.append(signum)
        for pid in list(alive):
            _send(pid, signum)

    # Passed on from before the first worker starts: a signal that came between a worker's
    # start and this handler would end the node trainer (SIGUSR1's default) unforwarded.
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        for i in range(launch.workers):
            alive[starter(launch.worker_env(i))] = i
        for signum in held:  # to every worker, those started after it came too
            for pid in list(alive):
                _send(pid, signum)
        return _supervise(dict(alive), alive, launch)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _forker(work: Callable[[], None]) -> Callable[[dict[str, str]], int]:
    def start(env: dict[str, str]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _worker(env, work)
        return pid
    return start


def _worker(env: dict[str, str], work: Callable[[], None]) -> None:
    """A forked worker: its rank's variables, its own timeline, the work; never returns."""
    code = 1
    try:
        _die_with_parent()
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        os.environ.update(env)
        from hpctrain import timeline

        timeline.forked()
        work()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    # A worker whose node trainer was SIGKILLed (srun --kill-on-bad-exit) must not train on.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _spawner(argv: Sequence[str]) -> Callable[[dict[str, str]], int]:
    def start(env: dict[str, str]) -> int:
        return os.posix_spawn(argv[0], list(argv), {**os.environ, **env})
    return start


def _supervise(pids: dict[int, int], alive: dict[int, int], launch: NodeLaunch) -> int:
    """Wait for every worker (`alive`: those not yet reaped, which the signal handler passes
    signals on to); a failure ends the rest."""
    codes: list[int] = []
    while alive:
        _reap(alive, codes)
        if any(c not in (0, EXIT_REQUEUE) for c in codes) and alive:
            _end(alive, codes)
        time.sleep(_POLL_S if alive else 0)
    code = combined(codes)
    if code not in (0, EXIT_REQUEUE):
        raise WorkersFailed(_failure(pids, codes, launch), code)
    return code


def _reap(alive: dict[int, int], codes: list[int]) -> None:
    # Each worker by its pid: waiting for any child could take one this process did not start.
    for pid in list(alive):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            alive.pop(pid)
            codes.append(os.waitstatus_to_exitcode(status))


def _failure(pids: dict[int, int], codes: list[int], launch: NodeLaunch) -> str:
    first = next(c for c in codes if c not in (0, EXIT_REQUEUE))
    how = f"signal {-first}" if first < 0 else f"exit status {first}"
    return (f"a worker of node {launch.node_rank} ended with {how}; the node's other "
            f"{len(pids) - 1} worker(s) were stopped")


def _end(alive: dict[int, int], codes: list[int]) -> None:
    """SIGTERM the remaining workers, SIGKILL those still there after the grace; reap them."""
    for pid in alive:
        _send(pid, signal.SIGTERM)
    deadline = time.monotonic() + SIBLING_GRACE_S
    while alive:
        _reap(alive, codes)
        if alive and time.monotonic() > deadline:
            for pid in alive:
                _send(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(_POLL_S if alive else 0)


def _send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has just ended
        os.kill(pid, signum)

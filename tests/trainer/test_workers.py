"""The node trainer of a per-node launch (hpctrain/trainer/workers.py): which processes it starts,
with which variables, and how it waits for them. Real forked and spawned processes, no torch."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from hpctrain.errors import ConfigError
from hpctrain.trainer import workers
from hpctrain.trainer.signals import EXIT_REQUEUE
from hpctrain.trainer.workers import NodeLaunch, WorkersFailed, combined, node_launch

PER_NODE = {"NODE_RANK": "1", "NNODES": "2", "LOCAL_WORLD_SIZE": "3", "WORLD_SIZE": "6"}


def test_a_per_node_launch_is_read_from_the_launchers_variables() -> None:
    launch = node_launch(PER_NODE)
    assert launch == NodeLaunch(node_rank=1, nodes=2, workers=3)
    assert launch.worker_env(2) == {"RANK": "5", "LOCAL_RANK": "2", "WORLD_SIZE": "6",
                                    "LOCAL_WORLD_SIZE": "3", "GROUP_RANK": "1",
                                    "HPCTRAIN_NODE_WORKER": "1"}
    # One rank already (srun's wrapper, torchrun, a worker), or no per-node launch at all.
    assert node_launch({**PER_NODE, "RANK": "0"}) is None
    assert node_launch({"LOCAL_WORLD_SIZE": "2"}) is None
    assert node_launch({}) is None


@pytest.mark.parametrize("env, what", [
    ({**PER_NODE, "NODE_RANK": "2"}, "NODE_RANK=2 is not below NNODES=2"),
    ({**PER_NODE, "WORLD_SIZE": "4"}, "WORLD_SIZE=4 is not NNODES=2 x LOCAL_WORLD_SIZE=3"),
    ({**PER_NODE, "LOCAL_WORLD_SIZE": "0"}, "LOCAL_WORLD_SIZE='0' is not a whole number"),
    ({**PER_NODE, "NODE_RANK": "$(x)"}, "NODE_RANK='$(x)' is not a whole number"),
])
def test_a_launch_that_does_not_add_up_is_refused(env: dict[str, str], what: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        node_launch(env)
    assert what in e.value.what


def test_the_nodes_status_is_the_first_failure_else_a_stop_else_success() -> None:
    assert combined([0, 0]) == 0
    assert combined([EXIT_REQUEUE, 0]) == EXIT_REQUEUE
    assert combined([0, 3, 1, EXIT_REQUEUE]) == 3
    assert combined([-signal.SIGKILL, 1]) == 128 + signal.SIGKILL


def _each_rank(tmp: Path) -> None:
    """A worker: writes its variables and succeeds."""
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    (tmp / f"rank-{os.environ['RANK']}").write_text(" ".join(os.environ[k] for k in keys))
    os._exit(0)


def test_forked_workers_find_their_ranks_and_the_node_succeeds(tmp_path: Path) -> None:
    launch = NodeLaunch(node_rank=1, nodes=2, workers=3)
    code = workers.run_node(launch, lambda: _each_rank(tmp_path), ["/bin/false"])
    assert code == 0
    got = sorted(p.read_text() for p in tmp_path.iterdir())
    assert got == ["3 0 6 3 1", "4 1 6 3 1", "5 2 6 3 1"]
    assert "RANK" not in os.environ  # the node trainer itself stays no rank


def _fails_once_all_run(tmp: Path, code: int, deaf: bool) -> None:
    """Rank 0 fails once every sibling runs its work (SIGTERM its default, or ignored if
    `deaf`); the siblings would sleep a minute and succeed, were they not stopped."""
    if deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = os.environ["RANK"]
    (tmp / f"ready-{rank}").touch()
    if rank == "0":
        siblings = int(os.environ["LOCAL_WORLD_SIZE"]) - 1
        while len(list(tmp.glob("ready-*"))) <= siblings:
            time.sleep(0.01)
        os._exit(code)
    time.sleep(60)
    os._exit(0)


def _watch_the_ending(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """The signals the node trainer sends, and its workers' statuses in the order they ended."""
    sent: list[int] = []
    ended: list[int] = []
    send, combine = workers._send, workers.combined

    def spy_send(pid: int, signum: int) -> None:
        sent.append(signum)
        send(pid, signum)

    def spy_combined(codes: list[int]) -> int:
        ended.extend(codes)
        return combine(codes)

    monkeypatch.setattr(workers, "_send", spy_send)
    monkeypatch.setattr(workers, "combined", spy_combined)
    return sent, ended


def test_a_failing_worker_ends_its_siblings_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent, ended = _watch_the_ending(monkeypatch)
    with pytest.raises(WorkersFailed) as e:
        workers.run_node(NodeLaunch(0, 1, 3), lambda: _fails_once_all_run(tmp_path, 3, False),
                         ["/bin/false"])
    assert e.value.exit_code == 3
    assert "a worker of node 0 ended with exit status 3" in e.value.what
    assert "other 2 worker(s) were stopped" in e.value.what
    # Both siblings ended by the SIGTERM they were sent, not by their minute's end.
    assert ended == [3, -signal.SIGTERM, -signal.SIGTERM]
    assert sent == [signal.SIGTERM, signal.SIGTERM]


def test_a_sibling_that_ignores_sigterm_is_killed_after_the_grace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "SIBLING_GRACE_S", 0.5)
    sent, ended = _watch_the_ending(monkeypatch)
    with pytest.raises(WorkersFailed) as e:
        workers.run_node(NodeLaunch(0, 1, 2), lambda: _fails_once_all_run(tmp_path, 1, True),
                         ["/bin/false"])
    assert e.value.exit_code == 1
    assert ended == [1, -signal.SIGKILL]
    assert sent == [signal.SIGTERM, signal.SIGKILL]


def _stops_on_usr1(tmp: Path) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    (tmp / f"ready-{os.environ['RANK']}").touch()
    stop.wait(60)
    os._exit(EXIT_REQUEUE if stop.is_set() else 1)


def test_a_signal_to_the_node_trainer_reaches_every_worker(tmp_path: Path) -> None:
    def signal_when_ready() -> None:
        while len(list(tmp_path.glob("ready-*"))) < 2:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGUSR1)

    sender = threading.Thread(target=signal_when_ready, daemon=True)
    sender.start()
    code = workers.run_node(NodeLaunch(0, 1, 2), lambda: _stops_on_usr1(tmp_path), ["/bin/false"])
    assert code == EXIT_REQUEUE
    # The node trainer's own handlers are back.
    assert signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, signal.default_int_handler)


def test_workers_start_as_new_processes_where_cuda_has_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(workers, "cuda_started", lambda: "torch has initialised CUDA")
    script = ("import os, pathlib, sys; r = os.environ['RANK']; "
              f"pathlib.Path({str(tmp_path)!r}, 'spawned-' + r).write_text('');"
              " sys.exit(0)")
    code = workers.run_node(NodeLaunch(0, 2, 2), lambda: os._exit(9),
                            [sys.executable, "-c", script])
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spawned-0", "spawned-1"]
    assert "torch has initialised CUDA, so this node's 2 workers start as new processes" in (
        capfd.readouterr().err)


def test_cuda_has_not_started_in_a_process_that_imported_nothing_of_it() -> None:
    assert workers.cuda_started() is None

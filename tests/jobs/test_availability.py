"""`hpctrain free`'s reading of SLURM (issue 42): each partition's GPUs busy and free and its
waiting jobs, from recorded sinfo and squeue output of SLURM 22.05 (the dev cluster emulating
`local` and `raven`). On the dev cluster: tests/jobs/test_free_cluster.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctrain.cli.free import Candidate
from hpctrain.slurm import availability, reservations

RECORDED = Path(__file__).resolve().parent / "recorded" / "slurm-22.05"


def _rows(suffix: str) -> dict[str, availability.PartitionGpus]:
    nodes = availability.parse_nodes((RECORDED / f"sinfo_gres_used{suffix}.txt").read_text())
    waiting = availability.parse_waiting(
        (RECORDED / f"squeue_waiting_partitions{suffix}.txt").read_text())
    return {r.partition: r for r in availability.by_partition(nodes, waiting)}


def test_one_partition_with_a_gpu_busy_on_each_node() -> None:
    (debug,) = _rows("").values()
    assert (debug.partition, debug.gpu_type, debug.gpus, debug.used, debug.free) == (
        "debug", "emu", 4, 2, 2)
    assert (debug.nodes, debug.idle_nodes, debug.waiting) == (2, 0, 1)


def test_partitions_that_share_nodes_and_a_job_waiting_for_planned_nodes() -> None:
    rows = _rows("_raven")
    gpu, dev = rows["gpu"], rows["gpudev"]
    assert (gpu.gpus, gpu.used, gpu.free, gpu.waiting) == (16, 10, 6, 1)
    assert (dev.gpus, dev.used, dev.free, dev.waiting) == (8, 2, 6, 0)
    # gpu2 is idle but planned for the waiting 4-node job: not counted as idle.
    assert gpu.idle_nodes == 0 and dev.idle_nodes == 0


def test_gres_forms_and_unusable_nodes() -> None:
    text = ("n1|p*|gpu:a100:4(S:0-1),tmpdisk:100|gpu:a100:1(IDX:0)|mix\n"
            "n2|p*|gpu:4|gpu:0|down*\n"
            "n3|p*|(null)|(null)|idle\n"
            "garbage line\n")
    rows = availability.by_partition(availability.parse_nodes(text),
                                     availability.parse_waiting("p,q\nq\n"))
    by = {(r.partition, r.gpu_type): r for r in rows}
    a100 = by[("p", "a100")]
    assert (a100.gpus, a100.used, a100.free) == (4, 1, 3)
    untyped = by[("p", "")]
    # n2 (down) and n3 (no GPUs) share the untyped row: n2's GPUs are not free.
    assert (untyped.nodes, untyped.usable_nodes, untyped.gpus, untyped.free) == (2, 1, 4, 0)
    assert untyped.waiting == 1
    assert availability.parse_waiting("p,q\nq\n") == {"p": 1, "q": 2}


def test_maintenance_windows_ahead_and_the_partitions_they_take() -> None:
    """Recorded on the dev cluster (partition debug: node1, node2): a window over both nodes,
    one over node2 only, and a reservation that is not maintenance (not shown)."""
    nodes = availability.parse_nodes((RECORDED / "sinfo_gres_used.txt").read_text())
    found = reservations.parse((RECORDED / "scontrol_show_reservation_three.txt").read_text())
    before = time.mktime(time.strptime("2026-11-27T20:00:00", "%Y-%m-%dT%H:%M:%S"))
    ahead = availability.windows(nodes, found, before)
    assert [(w.reservation.name, w.partitions) for w in ahead] == [
        ("maint-test", (("debug", 2, 2),)), ("lab course", (("debug", 1, 2),))]
    # Once the first window is over only the second is ahead; a node of no partition: none.
    assert [w.reservation.name for w in availability.windows(nodes, found, before + 5400)] == [
        "lab course"]
    assert availability.windows([n for n in nodes if n.node == "node1"], found,
                                before + 5400) == []
    assert ahead[1].as_dict()["partitions"] == [{"partition": "debug", "nodes_taken": 1,
                                                 "nodes": 2}]


def test_slurm_24_11_partitions_and_windows() -> None:
    """24.11's sinfo marks a node planned for a job with a trailing `-` (`mix-`)."""
    recorded = RECORDED.parent / "slurm-24.11"
    nodes = availability.parse_nodes((recorded / "sinfo_gres_used.txt").read_text())
    waiting = availability.parse_waiting(
        (recorded / "squeue_waiting_partitions.txt").read_text())
    (debug,) = availability.by_partition(nodes, waiting)
    assert (debug.gpus, debug.used, debug.free, debug.waiting) == (4, 2, 2, 1)
    found = reservations.parse((recorded / "scontrol_show_reservation_two.txt").read_text())
    now = time.mktime(time.strptime("2026-11-27T23:16:00", "%Y-%m-%dT%H:%M:%S"))
    assert [(w.reservation.name, w.partitions) for w in availability.windows(nodes, found, now)
            ] == [("maint-test", (("debug", 2, 2),)), ("lab course", (("debug", 1, 2),))]


def test_login_reaches_one_cluster(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "hpctrain", "free", "-P", "local", "-P", "raven",
                          "--login", "x"], capture_output=True, text=True, cwd=tmp_path,
                         check=False, timeout=60)
    assert res.returncode == 1 and "--login reaches one cluster" in res.stderr, res.stderr


def test_without_a_profile_every_profile_with_a_login_is_looked_at(tmp_path: Path) -> None:
    """None of the shipped profiles names a login host: the command says what to give."""
    res = subprocess.run([sys.executable, "-m", "hpctrain", "free"], capture_output=True,
                         text=True, cwd=tmp_path, check=False, timeout=60,
                         env={**os.environ, "HPCTRAIN_HOME": str(tmp_path)})
    assert res.returncode == 1 and "no profile names a login host" in res.stderr, res.stderr


def test_without_a_profile_the_running_dev_clusters_profile_is_looked_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newcomer review 2026-11-29, 6: `free` on the dev cluster needed `-P`."""
    from hpctrain.cli import free
    from hpctrain.devcluster import DevCluster
    from hpctrain.devcluster.state import Status
    from hpctrain.errors import HpctrainError

    conf = str(tmp_path / "etc" / "slurm.conf")
    running = Status(running=True, healthy=True, directory=str(tmp_path), slurm_conf=conf,
                     profile="raven", nodes_per_partition=2, node_names=["gpu1"], daemons=[])
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path))
    monkeypatch.setattr(DevCluster, "status", lambda self, with_sinfo=True: running)
    monkeypatch.setenv("SLURM_CONF", conf)
    assert free._with_login() == ["raven"]
    # SLURM_CONF names another cluster: that is the one free would ask, not the dev cluster's.
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "other.conf"))
    with pytest.raises(HpctrainError, match="no dev cluster runs here"):
        free._with_login()


def _seen(idle: int, waiting: int, windows: list[availability.Window] | None = None
          ) -> availability.Availability:
    row = availability.PartitionGpus("gpu", "a100", 2, 2, idle, 8, 0, 8, waiting)
    return availability.Availability([row], windows or [])


def _later(wait_s: float | None, topology: str = "2x4") -> Candidate:

    verdict: dict[str, object] = {"accepted": True, "wait_s": wait_s, "starts": "in 5 min"}
    return Candidate("raven", "gpu", topology, verdict, None)


def test_free_explains_a_later_start_than_its_idle_nodes() -> None:
    from hpctrain.cli.free import _later_though_idle

    # The newcomer's `2x4 in 5 min ... on gpu[1-2]` beside gpu1 and gpu2 idle: a job waiting.
    note = _later_though_idle(_later(300), _seen(idle=2, waiting=1))
    assert note is not None and "2 of gpu's nodes are idle now" in note, note
    assert "adds the time limits of the 1 job(s) waiting in gpu" in note, note
    window = availability.Window(reservations.Reservation(
        "m1", time.time() + 300, time.time() + 3600, ("gpu1", "gpu2"), frozenset({"MAINT"})),
        (("gpu", 2, 2),))
    said = _later_though_idle(_later(3600), _seen(idle=2, waiting=0, windows=[window]))
    assert said is not None and "maintenance m1" in said, said
    assert "SLURM's estimate" in str(_later_though_idle(_later(300), _seen(2, 0)))
    # Nothing to explain: a start now, nodes busy, a refusal.
    assert _later_though_idle(_later(0), _seen(2, 1)) is None
    assert _later_though_idle(_later(300), _seen(1, 1)) is None
    assert _later_though_idle(_later(None), _seen(2, 1)) is None

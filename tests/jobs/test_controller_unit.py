"""A dead or stopped slurmctld without the dev cluster: slurm.conf's controllers, the port
probe, the client's early stop, and what the watcher, logs -f and cancel make of it."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.errors import SlurmUnavailableError
from hpctrain.history import History
from hpctrain.slurm import controller
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.parsers import parse_cluster_name, parse_controllers
from hpctrain.slurm.runner import AccountingUnavailableError, Result, SlurmTimeoutError
from hpctrain.slurm.transport import ControllerDownError, LocalTransport
from hpctrain.tracking import logs
from hpctrain.tracking.watcher import JobWatcher

from .helpers import SETS, ReplayClient, recorded_jobs, recording, track
from .test_logs_unit import FakeTime

J = recorded_jobs()
CLUSTER = "hpctrain-dev"
runner = CliRunner()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listening() -> Iterator[int]:
    """A port that accepts connections and never answers: a stopped slurmctld."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def _conf(tmp_path: Path, port: int) -> str:
    path = tmp_path / "slurm.conf"
    path.write_text(f"ClusterName=hpctrain-dev\nSlurmctldHost=vm(127.0.0.1)\n"
                    f"SlurmctldPort={port}\n")
    return str(path)


# How long the stand-in commands below take to give up, like squeue retrying against a dead
# controller: far longer than the client's timeouts in these tests.
SLOW_S = 60


def _slow_command(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`name` on PATH retries for SLOW_S like squeue against a dead controller."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\nexec sleep {SLOW_S}\n")
    (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


# --- slurm.conf and the probe ---------------------------------------------------------------


def test_controllers_from_slurm_conf() -> None:
    conf = ("# comment SlurmctldHost=no\nClusterName=Raven\nSlurmctldHost=ravenctl1(10.0.0.1)\n"
            "slurmctldhost=ravenctl2   # backup\nSlurmctldPort=6817-6818\n")
    assert parse_controllers(conf) == [("ravenctl1", "10.0.0.1", 6817),
                                       ("ravenctl2", "ravenctl2", 6817)]
    assert parse_cluster_name(conf) == "raven"
    assert parse_controllers("ControlMachine=old\nControlAddr=10.1.1.1\n") == [
        ("old", "10.1.1.1", 6817)]
    assert parse_controllers("ClusterName=x\n") == []


def test_probe_names_a_refusing_controller(tmp_path: Path, listening: int) -> None:
    port = _closed_port()
    dead = controller.Controller("vm", "127.0.0.1", port)
    why = controller.unreachable([dead])
    assert why == f"slurmctld on vm (127.0.0.1:{port}) refuses connections " \
                  "(slurmctld is not running)"
    # A backup that accepts is enough; a stopped controller still accepts connections.
    alive = controller.Controller("127.0.0.1", "127.0.0.1", listening)
    assert controller.unreachable([dead, alive]) is None
    assert controller.unreachable([]) is None
    nowhere = controller.Controller("nowhere.invalid", "nowhere.invalid", 6817)
    assert "does not resolve" in (controller.unreachable([nowhere]) or "")
    assert controller.controllers(_conf(tmp_path, port)) == [dead]
    assert controller.controllers(str(tmp_path / "missing.conf")) == []


# --- the client ---------------------------------------------------------------------------


def test_a_refused_controller_stops_the_command_in_about_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_command(tmp_path, "squeue", monkeypatch)
    client = SlurmClient.local(_conf(tmp_path, _closed_port()), timeout_s=SLOW_S / 2)
    start = time.monotonic()
    with pytest.raises(ControllerDownError, match="squeue: the SLURM controller is down"):
        client.squeue(["1"])
    # Cut short by the port probe (after PROBE_AFTER_S), not at the end of the timeout: relative
    # to the timeout, so that a loaded machine's slowness cannot fail it.
    assert time.monotonic() - start < client.timeout_s / 2
    # Accounting goes to slurmdbd, not the controller: sacct is never cut short by the probe.
    _slow_command(tmp_path, "sacct", monkeypatch)
    with pytest.raises(AccountingUnavailableError) as acct:
        SlurmClient.local(client.transport.slurm_conf, timeout_s=1.5).sacct(["1"])
    assert "did not answer within 1.5 s" in acct.value.what


def test_a_stopped_controller_waits_for_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listening: int
) -> None:
    _slow_command(tmp_path, "squeue", monkeypatch)
    client = SlurmClient.local(_conf(tmp_path, listening), timeout_s=2)
    start = time.monotonic()
    with pytest.raises(SlurmTimeoutError) as e:
        client.squeue(["1"])
    # The whole timeout (a stopped controller accepts connections, so no early stop), and
    # cut off by it: the stand-in would have ended by itself after SLOW_S, without an error.
    assert client.timeout_s <= time.monotonic() - start < SLOW_S
    assert e.value.what.startswith("squeue did not answer within 2 s: slurmctld on vm (127.0.0.1:")
    assert "takes connections but did not answer" in e.value.what


@pytest.mark.parametrize("slurm", SETS)
def test_slurms_own_connect_failure_names_the_controller(tmp_path: Path, slurm: str) -> None:
    down = recording("squeue_controller_down", slurm)
    client = SlurmClient.local(_conf(tmp_path, _closed_port()))
    err = client.error_for(down)
    assert isinstance(err, ControllerDownError) and "refuses connections" in err.what
    assert "hpctrain devcluster up" in (err.fix or "")
    scancel = client.error_for(recording("scancel_controller_down", slurm))
    assert isinstance(scancel, ControllerDownError) and scancel.what.startswith("scancel:")
    # squeue gave up but the controller accepts connections now: SLURM's words, unchanged.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        back = SlurmClient.local(_conf(tmp_path, s.getsockname()[1]))
        err = back.error_for(down)
        stopped = back.error_for(recording("squeue_controller_stopped", slurm))
    assert type(err) is SlurmUnavailableError and "Unable to contact" in err.what
    # A stopped controller accepts connections: squeue's own timeout is reported as it is.
    assert type(stopped) is SlurmUnavailableError and "Socket timed out" in stopped.what


@pytest.mark.parametrize("slurm", SETS)
def test_scontrol_on_a_dead_controller_is_not_a_forgotten_job(tmp_path: Path, slurm: str) -> None:
    """24.11's JSON says "no such job" (exit 0) when no controller answers; 22.05's text fails.
    Either way the answer is "the controller is down", never "the job is gone"."""
    def client(port: int, name: str) -> ReplayClient:
        c = ReplayClient({"scontrol": recording(name, slurm)}, slurm=slurm)
        c.transport = LocalTransport(_conf(tmp_path, port))
        return c

    job_id = recording("scontrol_controller_down", slurm).argv[-1]
    with pytest.raises(ControllerDownError, match="the SLURM controller is down"):
        client(_closed_port(), "scontrol_controller_down").scontrol_job(job_id)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        assert client(s.getsockname()[1], "scontrol_unknown").scontrol_job("999999") is None


# --- the watcher, logs -f and cancel ----------------------------------------------------------


class DownClient(ReplayClient):
    """The dev cluster's recorded answers; while `down`, the recorded dead-controller ones."""

    def __init__(self, conf: str, **answers: Result) -> None:
        super().__init__({**{"squeue": recording("squeue_mixed"),
                             "sacct": recording("sacct_mixed")}, **answers})
        self.transport = LocalTransport(conf)
        self.down = True

    def run(self, argv, **kw):  # type: ignore[no-untyped-def]
        if self.down and argv[0] in ("squeue", "scontrol", "scancel"):
            res = recording(f"{argv[0]}_controller_down")
            self.calls.append(tuple(argv))
            raise self.error_for(Result(tuple(argv), res.returncode, res.stdout, res.stderr))
        return super().run(argv, **kw)


def test_refresh_with_a_dead_controller_shows_last_states_and_stores_nothing(
    history: History, tmp_path: Path
) -> None:
    track(history, J["running2"], J["completed"])
    client = DownClient(_conf(tmp_path, _closed_port()))
    watcher = JobWatcher(client, history, CLUSTER)
    before = history.all()
    records, report = watcher.refresh(before)
    assert isinstance(report.error, ControllerDownError) and report.calls == 1
    assert all(r.stale and not r.terminal and r.state == "PENDING" for r in records)
    assert history.all() == before
    client.down = False
    records, report = watcher.refresh(history.all())
    assert report.error is None
    got = {r.job_id: r for r in records}
    assert got[J["running2"]].state == "RUNNING" and not got[J["running2"]].stale
    assert got[J["completed"]].terminal


def test_poll_keeps_the_job_unfinished_while_slurm_is_silent(
    history: History, tmp_path: Path
) -> None:
    (rec,) = track(history, J["running2"])
    client = DownClient(_conf(tmp_path, _closed_port()))
    watcher = JobWatcher(client, history, CLUSTER)
    polls = [watcher.poll(rec) for _ in range(5)]
    assert all(p.error and not p.done and not p.changed for p in polls)
    assert [p.wait_s for p in polls] == [7.5, 11.25, 15.0, 15.0, 15.0]
    assert history.all() == [rec]
    client.down = False
    back = watcher.poll(rec)
    assert back.error is None and back.record.state == "RUNNING" and back.wait_s == 5.0


def test_follow_goes_on_while_the_controller_is_down(history: History, tmp_path: Path) -> None:
    out_file = tmp_path / "job.out"
    (rec,) = track(history, J["completed"], stdout_path=str(out_file))
    client = DownClient(_conf(tmp_path, _closed_port()),
                        squeue=recording("squeue_after"), sacct=recording("sacct_after"))
    t = FakeTime()

    def sleep(seconds: float) -> None:
        t.sleep(seconds)
        if t.now < 1060:
            with open(out_file, "ab") as fh:
                fh.write(b"x\n")
        # The controller comes back after a minute.
        client.down = t.now < 1060

    notes: list[str] = []
    written: list[bytes] = []
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), written.append,
                         notes.append, clock=t.clock, sleep=sleep)
    assert result.record.state == "COMPLETED" and result.record.terminal
    assert result.unanswered >= 4 and b"".join(written).count(b"x\n") > 200
    silent = [n for n in notes if "the SLURM controller is down" in n]
    assert len(silent) == 1 and "still following the file" in silent[0]
    assert sum(n.startswith("SLURM answers again: job ") for n in notes) == 1


def test_cancel_with_a_dead_controller_fails_and_skips_nothing(
    history: History, tmp_path: Path
) -> None:
    track(history, "1", "2")
    client = DownClient(_conf(tmp_path, _closed_port()))
    with pytest.raises(ControllerDownError) as e:
        JobWatcher(client, history, CLUSTER).cancel(history.all())
    assert e.value.what.startswith("nothing was cancelled (1, 2): scancel: the SLURM controller")
    assert [r.state for r in history.all()] == ["PENDING", "PENDING"]


# --- the commands -----------------------------------------------------------------------------


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def _backend(monkeypatch: pytest.MonkeyPatch, client: SlurmClient, cluster: str) -> None:
    monkeypatch.setattr("hpctrain.cli.backends.slurm", lambda: (client, cluster))


def test_status_and_cancel_name_the_dead_controller(
    cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _backend(monkeypatch, DownClient(_conf(tmp_path, _closed_port())), CLUSTER)
    track(History(), J["running2"])
    res = runner.invoke(app, ["status"], env={"COLUMNS": "200"})
    assert res.exit_code == 1 and "PENDING?" in res.stdout
    assert "the SLURM controller is down" in str(res.exception)
    assert "last ones seen (marked ?)" in str(res.exception)
    res = runner.invoke(app, ["status", "--json"])
    data = json.loads(res.stdout)
    assert res.exit_code == 1 and data["jobs"][0]["stale"] and not data["jobs"][0]["terminal"]
    assert "refuses connections" in data["error"]["what"]
    for args in (["cancel", J["running2"]], ["cancel", "--all", "--yes"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 1 and "nothing was cancelled" in str(res.exception)


def test_an_unknown_cluster_is_an_error_not_another_cluster(
    cli_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = ReplayClient({})
    _backend(monkeypatch, client, "")
    # No slurm.conf names a cluster here: the client says it does not know which one.
    monkeypatch.setattr(ReplayClient, "cluster_name", lambda self: None)
    monkeypatch.setattr(LocalTransport, "conf_path", lambda self: None)
    track(History(), "5", stdout_path=str(tmp_path / "5.out"))
    (tmp_path / "5.out").write_text("hello\n")
    res = runner.invoke(app, ["status", "--json"])
    data = json.loads(res.stdout)
    assert res.exit_code == 1 and data["warnings"] == [] and data["jobs"][0]["stale"]
    assert "no slurm.conf is readable here" in str(res.exception)
    res = runner.invoke(app, ["cancel", "--all", "--yes"])
    assert res.exit_code == 1 and "no slurm.conf is readable here" in str(res.exception)
    res = runner.invoke(app, ["logs", "-f", "5"])
    assert res.exit_code == 1 and res.stdout == "hello\n"
    assert "no slurm.conf is readable here" in str(res.exception)
    assert client.calls == []

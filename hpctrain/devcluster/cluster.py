"""Bring the dev cluster up and down: munged, MariaDB, slurmdbd, slurmctld and one slurmd a node."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hpctrain.devcluster.accounting import sync_accounting
from hpctrain.devcluster.conffiles import SlurmConfigs, write_files
from hpctrain.devcluster.daemons import Daemons, find_programs
from hpctrain.devcluster.hosts import ensure_hosts
from hpctrain.devcluster.layout import Layout, Ports
from hpctrain.devcluster.nodes import NodeWatch
from hpctrain.devcluster.processes import (
    Daemon,
    kill_by_environ,
    read_pid,
    running_pid,
    stop,
    wait_until,
)
from hpctrain.devcluster.starting import check_ports, start_base, start_slurm
from hpctrain.devcluster.state import (
    DaemonStatus,
    Status,
    UpResult,
    known_nodes,
    publish,
    read_state,
    state_dict,
    withdraw,
    write_state,
)
from hpctrain.devcluster.topology import DEFAULT_NODES, ClusterPlan, plan_cluster
from hpctrain.errors import DevClusterError, HpctrainError, SlurmError
from hpctrain.files import paths
from hpctrain.profiles import load_profile
from hpctrain.slurm.client import SlurmClient

Progress = Callable[[str], None]
# Generous limits; on the 2-core dev machine each step takes a second or two.
IDLE_TIMEOUT_S = 30.0
LOCK_TIMEOUT_S = 180.0
BASE_DAEMONS = ("munged", "mysqld", "slurmdbd", "slurmctld")


def _quiet(_msg: str) -> None:
    pass


# Moves every port of the dev cluster, so that two can run on one machine (the SLURM 24.11
# root's beside the host's: scripts/in-slurm-root.sh sets it; docs/devcluster.md).
PORT_OFFSET_VAR = "HPCTRAIN_DEVCLUSTER_PORT_OFFSET"
_MAX_PORT_OFFSET = 20000


def ports_from_environment() -> Ports:
    """The default ports, moved by HPCTRAIN_DEVCLUSTER_PORT_OFFSET when it is set."""
    raw = os.environ.get(PORT_OFFSET_VAR, "").strip()
    if not raw:
        return Ports()
    if not raw.isdigit() or int(raw) > _MAX_PORT_OFFSET:
        raise HpctrainError(f"{PORT_OFFSET_VAR}={raw!r} is not a port offset",
                            f"give a whole number from 0 to {_MAX_PORT_OFFSET}, or unset it")
    return Ports().shifted(int(raw))


class DevCluster:
    """The dev cluster living in one directory (default: paths.devcluster_dir())."""

    def __init__(self, root: Path | None = None, ports: Ports | None = None,
                 pointer: Path | None = None) -> None:
        directory = Path(root) if root is not None else paths.devcluster_dir()
        self.layout = Layout.for_dir(directory)
        self.ports = ports or ports_from_environment()
        self.daemons = Daemons(self.layout, self.ports)
        # Where `up` publishes slurm.conf for hpctrain's commands. By default only the cluster
        # in HPCTRAIN_HOME's own directory does; any other is reached through SLURM_CONF.
        if pointer is None and directory == paths.devcluster_dir():
            pointer = paths.slurm_conf_pointer()
        self.pointer = pointer

    def client(self, timeout_s: float = 15.0) -> SlurmClient:
        """A SLURM client for this cluster, whatever SLURM_CONF says."""
        return SlurmClient.local(str(self.layout.slurm_conf), timeout_s=timeout_s)

    def read_state(self) -> dict[str, Any]:
        """state.json's content; empty if there is none."""
        return read_state(self.layout)

    # --- status ------------------------------------------------------------------------------

    def status(self, with_sinfo: bool = True) -> Status:
        """Which of our daemons run, the emulated profile, and sinfo's view."""
        state = self.read_state()
        nodes = list(state.get("node_names") or [])
        daemons = [_daemon_status(d) for d in self.daemons.all(known_nodes(self.layout))]
        alive = {d.name for d in daemons if d.alive}
        running = "slurmctld" in alive
        expected = {*BASE_DAEMONS, *(f"slurmd:{n}" for n in nodes)}
        return Status(
            running=running,
            healthy=bool(nodes) and expected <= alive,
            directory=str(self.layout.root),
            slurm_conf=str(self.layout.slurm_conf),
            profile=state.get("profile"),
            nodes_per_partition=state.get("nodes_per_partition"),
            node_names=nodes,
            daemons=daemons,
            sinfo=self._sinfo() if with_sinfo and running else None,
            state=state,
        )

    def _sinfo(self) -> str:
        try:
            return self.client(timeout_s=10).sinfo()
        except HpctrainError as e:
            return f"(sinfo failed: {e})"

    # --- up ----------------------------------------------------------------------------------

    def up(self, profile: str = "local", nodes: int = DEFAULT_NODES, replace: bool = False,
           progress: Progress | None = None) -> UpResult:
        """Start (or reuse) the cluster emulating `profile` with `nodes` nodes per node shape."""
        say = progress or _quiet
        t0 = time.monotonic()
        plan = self._plan(profile, nodes)
        configs = SlurmConfigs.render(plan, self.layout, socket.gethostname())
        with self._locked():
            state = self.read_state()
            ctld_alive = running_pid(self.daemons.slurmctld()) is not None
            same = _same_plan(state, plan) and configs.written_in(self.layout)
            if ctld_alive and same and self._complete(plan):
                return self._reuse(plan, state, say, t0)
            if ctld_alive and not same and not replace and state.get("profile"):
                raise _running_another(state, plan)
            if same:
                # What runs was started for this very configuration: a repair starts only what
                # is dead, so slurmctld's state and the jobs on healthy nodes live on.
                return self._start(plan, configs, say, t0, state.get("started_at"))
            # Without a state file the running daemons are still ours (pid files and /proc
            # say so) but describe nothing we can report: restart them.
            self._stop_slurm(say)
            result = self._start(plan, configs, say, t0)
            if ctld_alive and state.get("profile"):
                # A switch, not a repair: `up` says from what (munged, MariaDB and slurmdbd
                # live on, so "started" alone would read as a repair).
                result.replaced = {"profile": state.get("profile"),
                                   "nodes_per_partition": state.get("nodes_per_partition")}
            return result

    def _plan(self, profile: str, nodes: int) -> ClusterPlan:
        find_programs()
        if os.geteuid() != 0:
            raise DevClusterError(
                "the dev cluster runs SLURM and MariaDB as root and edits /etc/hosts",
                "run it as root, e.g. `sudo -E hpctrain devcluster up`",
            )
        try:
            return plan_cluster(load_profile(profile), nodes, self.ports)
        except ValueError as e:
            raise DevClusterError(str(e), "use a smaller --nodes") from None

    def _reuse(self, plan: ClusterPlan, state: dict[str, Any], say: Progress,
               t0: float) -> UpResult:
        say(f"dev cluster already running profile {plan.profile}")
        # One sinfo: also resumes nodes an earlier run left drained.
        self._wait_idle(plan, _quiet)
        result = self._result(plan, True, t0)
        if state.get("phase") != "running":
            write_state(self.layout, state_dict(plan, self.layout, "running", pids=result.pids,
                                                started_at=state.get("started_at")))
        self._publish()
        return result

    def _start(self, plan: ClusterPlan, configs: SlurmConfigs, say: Progress, t0: float,
               started_at: str | None = None) -> UpResult:
        """Start every daemon of the plan that does not run; those that do are left alone."""
        before = self._result(plan, False, t0).pids
        check_ports(self.daemons, plan)
        write_files(plan, self.layout, configs)
        moved = self.ports != Ports()
        ensure_hosts(plan.node_names, tag=f"port {self.ports.slurmctld}" if moved else "")
        write_state(self.layout, state_dict(plan, self.layout, "starting", started_at=started_at))
        start_base(self.daemons, say)
        self._sync_accounting(plan, say)
        start_slurm(self.daemons, plan, say)
        self._wait_idle(plan, say)
        result = self._result(plan, False, t0)
        result.started = [n for n, pid in result.pids.items() if before.get(n) != pid]
        write_state(self.layout, state_dict(plan, self.layout, "running", pids=result.pids,
                                            started_at=started_at))
        self._publish()
        return result

    def _complete(self, plan: ClusterPlan) -> bool:
        return all(running_pid(d) is not None for d in self.daemons.all(plan.node_names))

    def _result(self, plan: ClusterPlan, already: bool, t0: float) -> UpResult:
        daemons = self.daemons.all(plan.node_names)
        pids = {d.name: pid for d in daemons if (pid := running_pid(d)) is not None}
        return UpResult(
            already_running=already,
            profile=plan.profile,
            nodes_per_partition=plan.nodes_per_group,
            node_names=plan.node_names,
            slurm_conf=self.layout.slurm_conf,
            seconds=time.monotonic() - t0,
            pids=pids,
        )

    def _publish(self) -> None:
        if self.pointer is not None:
            publish(self.pointer, self.layout.slurm_conf)

    def _sync_accounting(self, plan: ClusterPlan, say: Progress) -> None:
        """Register the cluster (before slurmctld starts), its QOS, accounts and users."""
        say("configuring accounting (cluster, QOS, accounts)")
        try:
            sync_accounting(self.client(timeout_s=20), plan)
        except SlurmError as e:
            raise DevClusterError(e.what, f"see {self.layout.slurmdbd_log}") from None

    def _wait_idle(self, plan: ClusterPlan, say: Progress) -> None:
        say("waiting for the nodes to be idle")
        watch = NodeWatch(self.client(timeout_s=10), plan.node_names)
        try:
            wait_until(watch.all_ready, IDLE_TIMEOUT_S, "the nodes did not become idle",
                       f"see {self.layout.log}/slurmd-*.log and {self.layout.slurmctld_log}",
                       interval_s=0.5)
        except DevClusterError as e:
            raise DevClusterError(f"{e.what}: {watch.last}\n{watch.reasons()}", e.fix) from None

    # --- stopping ----------------------------------------------------------------------------

    def _stop_slurm(self, say: Progress) -> None:
        ctld, *slurmds = self.daemons.slurm(known_nodes(self.layout))
        if any(running_pid(d) is not None for d in (ctld, *slurmds)):
            say("stopping the running slurmctld and slurmd")
        self._cancel_jobs()
        stop(slurmds)
        stop([ctld])
        kill_by_environ("slurmstepd", f"SLURM_CONF={self.layout.slurm_conf}")

    def _cancel_jobs(self) -> None:
        """Cancel our jobs while slurmctld still runs, so no job step outlives its slurmd."""
        if running_pid(self.daemons.slurmctld()) is None:
            return
        client = self.client(timeout_s=10)
        try:
            ids = client.queued_job_ids()
            if ids:
                with contextlib.suppress(SlurmError):
                    client.scancel(ids)
                wait_until(lambda: not client.queued_job_ids(), 15.0,
                           "jobs did not end after scancel", "check `squeue`", interval_s=0.5)
        except HpctrainError:
            pass  # best effort: the steps are killed below anyway

    def down(self, progress: Progress | None = None) -> list[tuple[str, int]]:
        """Stop exactly the daemons this directory's pid files name (and verify as ours)."""
        say = progress or _quiet
        with self._locked():
            self._cancel_jobs()
            ctld, *slurmds = self.daemons.slurm(known_nodes(self.layout))
            munged, mysqld, slurmdbd = self.daemons.base()
            stopped: list[tuple[str, int]] = []
            for group in (slurmds, [ctld], [slurmdbd], [mysqld], [munged]):
                for name, pid in stop(group):
                    say(f"stopped {name} (pid {pid})")
                    stopped.append((name, pid))
            kill_by_environ("slurmstepd", f"SLURM_CONF={self.layout.slurm_conf}")
            with contextlib.suppress(FileNotFoundError):
                self.layout.munge_socket.unlink()
            if self.pointer is not None:
                withdraw(self.pointer, self.layout.slurm_conf)
            self._mark_stopped()
            return stopped

    def _mark_stopped(self) -> None:
        state = self.read_state()
        if state:
            state["phase"] = "stopped"
            state["pids"] = {}
            write_state(self.layout, state)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One up/down at a time per directory (test sessions and users share the cluster)."""
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with open(self.layout.lock_file, "a+") as fh:
            _lock(fh.fileno(), self.layout.lock_file)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _lock(fd: int, name: Path) -> None:
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise DevClusterError(f"another `hpctrain devcluster` command holds {name}",
                                      "wait for it to finish, then retry") from None
            time.sleep(0.5)


def _daemon_status(daemon: Daemon) -> DaemonStatus:
    ours = running_pid(daemon)
    return DaemonStatus(daemon.name, ours if ours is not None else read_pid(daemon.pid_file),
                        ours is not None)


def _same_plan(state: dict[str, Any], plan: ClusterPlan) -> bool:
    return (state.get("profile") == plan.profile
            and state.get("nodes_per_partition") == plan.nodes_per_group)


def _running_another(state: dict[str, Any], plan: ClusterPlan) -> DevClusterError:
    running = state.get("profile", "?")
    what = (
        f"the dev cluster is running profile {running} "
        f"with {state.get('nodes_per_partition', '?')} node(s) per partition"
        if not _same_plan(state, plan)
        else f"the dev cluster's configuration for profile {running} changed"
    )
    return DevClusterError(
        what,
        "run `hpctrain devcluster down` first, or pass --replace to restart it "
        f"with profile {plan.profile}",
    )

"""Bring the dev cluster up and down: munged, MariaDB, slurmdbd, slurmctld and one slurmd a node."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpctrain import paths
from hpctrain.devcluster import config
from hpctrain.devcluster.config import ClusterPlan, Layout, Ports
from hpctrain.devcluster.processes import (
    Daemon,
    kill_by_environ,
    log_tail,
    port_open,
    port_owner,
    read_pid,
    running_pid,
    start,
    stop,
    wait_started,
    wait_until,
)
from hpctrain.errors import DevClusterError, HpctrainError
from hpctrain.profiles import load_profile
from hpctrain.slurm.client import SlurmClient

PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
INSTALL_FIX = (
    f"install them: sudo apt-get install -y {PACKAGES} (Debian/Ubuntu; scripts/setup.sh does it)"
)
# Program -> names it goes by (Debian links mysqld to mariadbd).
REQUIRED_PROGRAMS: dict[str, tuple[str, ...]] = {
    "slurmctld": ("slurmctld",),
    "slurmd": ("slurmd",),
    "slurmdbd": ("slurmdbd",),
    "sinfo": ("sinfo",),
    "sbatch": ("sbatch",),
    "sacctmgr": ("sacctmgr",),
    "scontrol": ("scontrol",),
    "munged": ("munged",),
    "munge": ("munge",),
    "unmunge": ("unmunge",),
    "mysqld": ("mysqld", "mariadbd"),
    "mysql_install_db": ("mysql_install_db", "mariadb-install-db"),
    "setsid": ("setsid",),
}
HOSTS_FILE = Path("/etc/hosts")
# Generous limits; on the 2-core dev machine each step takes a second or two.
START_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 30.0


def find_programs() -> dict[str, str]:
    """Resolve every program the dev cluster needs; DevClusterError lists the missing ones."""
    found: dict[str, str] = {}
    missing: list[str] = []
    for key, names in REQUIRED_PROGRAMS.items():
        path = next((p for p in (shutil.which(n) for n in names) if p), None)
        if path is None:
            missing.append(key)
        else:
            found[key] = path
    if missing:
        raise DevClusterError(
            f"the dev cluster needs programs that are not on PATH: {', '.join(missing)}",
            INSTALL_FIX,
        )
    return found


@dataclass
class DaemonStatus:
    name: str
    pid: int | None
    alive: bool


@dataclass
class Status:
    running: bool
    healthy: bool
    directory: str
    slurm_conf: str
    profile: str | None
    nodes_per_partition: int | None
    node_names: list[str]
    daemons: list[DaemonStatus]
    sinfo: str | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class UpResult:
    already_running: bool
    profile: str
    nodes_per_partition: int
    node_names: list[str]
    slurm_conf: Path
    seconds: float
    pids: dict[str, int]

    @property
    def export_line(self) -> str:
        return f"export SLURM_CONF={self.slurm_conf}"


class DevCluster:
    """The dev cluster living in one directory (default: paths.devcluster_dir())."""

    def __init__(self, root: Path | None = None, ports: Ports | None = None) -> None:
        self.layout = Layout.for_dir(root if root is not None else paths.devcluster_dir())
        self.ports = ports or Ports()

    # --- introspection -------------------------------------------------------------------

    def client(self, timeout_s: float = 15.0) -> SlurmClient:
        return SlurmClient(slurm_conf=str(self.layout.slurm_conf), timeout_s=timeout_s)

    def read_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.layout.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_state(self, data: dict[str, Any]) -> None:
        tmp = self.layout.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.layout.state_file)

    def _known_nodes(self) -> list[str]:
        """Nodes named in the state file plus any slurmd pid file (a crashed up may leave some)."""
        names = list(self.read_state().get("node_names") or [])
        if self.layout.run.is_dir():
            for f in sorted(self.layout.run.glob("slurmd-*.pid")):
                node = f.name[len("slurmd-"):-len(".pid")]
                if node not in names:
                    names.append(node)
        return names

    def base_daemons(self) -> list[Daemon]:
        """munged, mysqld and slurmdbd: independent of the emulated profile."""
        L = self.layout
        conf_env = {"SLURM_CONF": str(L.slurm_conf)}
        return [
            Daemon(
                name="munged",
                argv=(
                    "munged",
                    f"--socket={L.munge_socket}",
                    f"--pid-file={L.munge_pid}",
                    f"--log-file={L.munge_log}",
                    f"--seed-file={L.munge_seed}",
                    f"--key-file={L.munge_key}",
                    # Our key and socket live in the user's tree, whose parent directories
                    # munged would otherwise reject as "insecure" (e.g. a CI checkout).
                    "--force",
                ),
                pid_file=L.munge_pid,
                log_file=L.munge_log,
                programs=("munged",),
                marker=str(L.munge_socket),
            ),
            Daemon(
                name="mysqld",
                argv=(
                    "mysqld",
                    # --no-defaults must come first: /etc/mysql/my.cnf is the system server's.
                    "--no-defaults",
                    "--user=root",
                    f"--datadir={L.db}",
                    f"--socket={L.mysql_socket}",
                    f"--pid-file={L.mysql_pid}",
                    f"--log-error={L.mysql_log}",
                    f"--init-file={L.mysql_init}",
                    "--bind-address=127.0.0.1",
                    f"--port={self.ports.mysqld}",
                    "--skip-name-resolve",
                    "--skip-log-bin",
                    "--performance-schema=OFF",
                    "--innodb-buffer-pool-size=64M",
                    # slurmdbd warns below 900 s: its upgrades hold long locks.
                    "--innodb-lock-wait-timeout=900",
                    "--max-connections=50",
                ),
                pid_file=L.mysql_pid,
                log_file=L.mysql_log,
                programs=("mysqld", "mariadbd"),
                marker=f"--datadir={L.db}",
                self_daemonizes=False,
            ),
            Daemon(
                name="slurmdbd",
                argv=("slurmdbd",),
                pid_file=L.slurmdbd_pid,
                log_file=L.slurmdbd_log,
                programs=("slurmdbd",),
                # slurmdbd has no -f: its environment names our config.
                marker=f"SLURM_CONF={L.slurm_conf}",
                env=conf_env,
            ),
        ]

    def slurmctld_daemon(self) -> Daemon:
        L = self.layout
        return Daemon(
            name="slurmctld",
            argv=("slurmctld", "-f", str(L.slurm_conf)),
            pid_file=L.slurmctld_pid,
            log_file=L.slurmctld_log,
            programs=("slurmctld",),
            marker=f"SLURM_CONF={L.slurm_conf}",
            env={"SLURM_CONF": str(L.slurm_conf)},
        )

    def slurmd_daemon(self, node: str) -> Daemon:
        L = self.layout
        return Daemon(
            name=f"slurmd:{node}",
            argv=("slurmd", "-N", node, "-f", str(L.slurm_conf)),
            pid_file=L.slurmd_pid(node),
            log_file=L.slurmd_log(node),
            programs=("slurmd",),
            marker=f"SLURM_CONF={L.slurm_conf}",
            exact_arg=node,
            env={"SLURM_CONF": str(L.slurm_conf)},
        )

    def all_daemons(self) -> list[Daemon]:
        """Start order; `down` stops them in reverse."""
        nodes = [self.slurmd_daemon(n) for n in self._known_nodes()]
        return [*self.base_daemons(), self.slurmctld_daemon(), *nodes]

    def status(self, with_sinfo: bool = True) -> Status:
        """Which of our daemons run, the emulated profile, and sinfo's view."""
        state = self.read_state()
        daemons = []
        for d in self.all_daemons():
            pid = read_pid(d.pid_file)
            ours = running_pid(d)
            shown = ours if ours is not None else pid
            daemons.append(DaemonStatus(d.name, shown, ours is not None))
        expected = {"munged", "mysqld", "slurmdbd", "slurmctld",
                    *(f"slurmd:{n}" for n in state.get("node_names") or [])}
        alive = {d.name for d in daemons if d.alive}
        running = "slurmctld" in alive
        healthy = bool(state.get("node_names")) and expected <= alive
        sinfo = None
        if with_sinfo and running:
            try:
                sinfo = self.client(timeout_s=10).run(["sinfo"], check=False).stdout.rstrip()
            except HpctrainError as e:
                sinfo = f"(sinfo failed: {e})"
        return Status(
            running=running,
            healthy=healthy,
            directory=str(self.layout.root),
            slurm_conf=str(self.layout.slurm_conf),
            profile=state.get("profile") if state else None,
            nodes_per_partition=state.get("nodes_per_partition") if state else None,
            node_names=list(state.get("node_names") or []),
            daemons=daemons,
            sinfo=sinfo,
            state=state,
        )

    # --- locking ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, timeout_s: float = 180.0) -> Iterator[None]:
        """One up/down at a time per directory (test sessions and users share the cluster)."""
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with open(self.layout.lock_file, "a+") as fh:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise DevClusterError(
                            f"another `hpctrain devcluster` command holds {self.layout.lock_file}",
                            "wait for it to finish, then retry",
                        ) from None
                    time.sleep(0.5)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- up ---------------------------------------------------------------------------------

    def up(
        self,
        profile: str = "local",
        nodes: int = config.DEFAULT_NODES,
        replace: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> UpResult:
        """Start (or reuse) the cluster emulating `profile` with `nodes` nodes per node shape."""
        say = progress or (lambda _msg: None)
        t0 = time.monotonic()
        find_programs()
        if os.geteuid() != 0:
            raise DevClusterError(
                "the dev cluster runs SLURM and MariaDB as root and edits /etc/hosts",
                "run it as root, e.g. `sudo -E hpctrain devcluster up`",
            )
        prof = load_profile(profile)
        try:
            plan = config.plan_cluster(prof, nodes, self.ports)
        except ValueError as e:
            raise DevClusterError(str(e), "use a smaller --nodes") from None
        hostname = socket.gethostname()
        slurm_text = config.render_slurm_conf(plan, self.layout, hostname)
        gres_text = config.render_gres_conf(plan, self.layout)
        with self._locked():
            state = self.read_state()
            ctld_alive = running_pid(self.slurmctld_daemon()) is not None
            same = (
                state.get("profile") == plan.profile
                and state.get("nodes_per_partition") == nodes
                and _read(self.layout.slurm_conf) == slurm_text
                and _read(self.layout.gres_conf) == gres_text
            )
            if ctld_alive and same and self._complete(plan):
                say(f"dev cluster already running profile {plan.profile}")
                # One sinfo: also resumes nodes an earlier run left drained.
                self._wait_idle(plan, lambda _msg: None)
                result = self._result(plan, True, t0)
                if state.get("phase") != "running":
                    self._write_state(self._state_dict(plan, "running", pids=result.pids,
                                                       started_at=state.get("started_at")))
                return result
            # Without a state file the running daemons are still ours (pid files and /proc
            # say so) but describe nothing we can report: restart them.
            if ctld_alive and not same and not replace and state.get("profile"):
                running = state.get("profile", "?")
                what = (
                    f"the dev cluster is running profile {running} "
                    f"with {state.get('nodes_per_partition', '?')} node(s) per partition"
                    if (running, state.get("nodes_per_partition")) != (plan.profile, nodes)
                    else f"the dev cluster's configuration for profile {running} changed"
                )
                raise DevClusterError(
                    what,
                    "run `hpctrain devcluster down` first, or pass --replace to restart it "
                    f"with profile {plan.profile}",
                )
            # Anything of ours that runs for another plan, or half-started, goes first.
            self._stop_slurm(say)
            self._check_ports(plan)
            self._prepare(plan, slurm_text, gres_text)
            self._write_state(self._state_dict(plan, "starting"))
            self._ensure_base(say)
            self._sync_accounting(plan, say)
            self._start_slurm(plan, say)
            self._wait_idle(plan, say)
            result = self._result(plan, False, t0)
            self._write_state(self._state_dict(plan, "running", pids=result.pids))
            return result

    def _complete(self, plan: ClusterPlan) -> bool:
        daemons = [*self.base_daemons(), self.slurmctld_daemon(),
                   *(self.slurmd_daemon(n) for n in plan.node_names)]
        return all(running_pid(d) is not None for d in daemons)

    def _result(self, plan: ClusterPlan, already: bool, t0: float) -> UpResult:
        daemons = [*self.base_daemons(), self.slurmctld_daemon(),
                   *(self.slurmd_daemon(n) for n in plan.node_names)]
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

    def _state_dict(self, plan: ClusterPlan, phase: str, pids: dict[str, int] | None = None,
                    started_at: str | None = None) -> dict[str, Any]:
        return {
            "phase": phase,
            "profile": plan.profile,
            "nodes_per_partition": plan.nodes_per_group,
            "cluster_name": config.CLUSTER_NAME,
            "node_names": plan.node_names,
            "groups": [
                {"prefix": g.prefix, "partitions": list(g.partitions), "nodes": list(g.nodes),
                 "cpus": g.cpus, "mem_mb": g.mem_mb, "gres": g.gres,
                 "features": list(g.features)}
                for g in plan.groups
            ],
            "ports": {**self.ports.as_dict(), "slurmd": plan.node_ports()},
            "pids": pids or {},
            "slurm_conf": str(self.layout.slurm_conf),
            "socket_dir": str(self.layout.socket_dir),
            "started_at": started_at
            or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    def _prepare(self, plan: ClusterPlan, slurm_text: str, gres_text: str) -> None:
        L = self.layout
        for d in (L.etc, L.run, L.log, L.spool, L.state_save, L.dev, L.socket_dir,
                  L.slurmd_spool, L.munge_run, L.munge_log_dir):
            d.mkdir(parents=True, exist_ok=True)
        # Other users' sbatch must reach the munge socket; nothing here is secret but the
        # key and the database password, which get 0600/0400 below.
        for d in (L.root, L.run, L.socket_dir, L.munge_run):
            d.chmod(0o755)
        L.munge_etc.mkdir(mode=0o700, exist_ok=True)
        if not L.munge_key.is_file():
            _write_secret(L.munge_key, os.urandom(1024), 0o400)
        if not L.db_secret.is_file():
            _write_secret(L.db_secret, secrets.token_urlsafe(18).encode(), 0o600)
        password = L.db_secret.read_text().strip()
        L.slurm_conf.write_text(slurm_text)
        L.gres_conf.write_text(gres_text)
        _write_secret(L.slurmdbd_conf,
                      config.render_slurmdbd_conf(L, self.ports, password).encode(), 0o600)
        _write_secret(L.mysql_init, config.render_mysql_init(password).encode(), 0o600)
        for f in config.gres_device_files(plan, L):
            f.touch(exist_ok=True)
        _ensure_hosts(plan.node_names)

    def _check_ports(self, plan: ClusterPlan) -> None:
        """Before starting anything: the ports of the daemons still to start must be free."""
        _munged, mysqld, slurmdbd = self.base_daemons()
        needed = [(self.ports.slurmctld, "slurmctld"),
                  *((p, f"slurmd {n}") for n, p in plan.node_ports().items())]
        if running_pid(mysqld) is None:
            needed.append((self.ports.mysqld, "mysqld"))
        if running_pid(slurmdbd) is None:
            needed.append((self.ports.slurmdbd, "slurmdbd"))
        for port, daemon in needed:
            if port_open(port):
                raise DevClusterError(
                    f"port {port} for {daemon} is taken by {port_owner(port)}",
                    "stop that process; if it is a dev cluster under another HPCTRAIN_HOME, "
                    "run `HPCTRAIN_HOME=<that dir> hpctrain devcluster down`",
                )

    def _ensure_base(self, say: Callable[[str], None]) -> None:
        L = self.layout
        munged, mysqld, slurmdbd = self.base_daemons()
        if running_pid(munged) is None:
            say("starting munged")
            with contextlib.suppress(FileNotFoundError):
                L.munge_socket.unlink()
            start(munged)
            wait_started(munged, START_TIMEOUT_S, lambda: _munge_works(L.munge_socket))
        if running_pid(mysqld) is None:
            self._init_db(say)
            say("starting mysqld")
            start(mysqld)
            wait_started(mysqld, START_TIMEOUT_S, lambda: port_open(self.ports.mysqld))
        if running_pid(slurmdbd) is None:
            say("starting slurmdbd")
            start(slurmdbd)
            wait_started(slurmdbd, START_TIMEOUT_S, lambda: port_open(self.ports.slurmdbd))

    def _init_db(self, say: Callable[[str], None]) -> None:
        L = self.layout
        if (L.db / "mysql").is_dir():
            return
        say("initialising the accounting database (first start only)")
        if L.db.exists():
            shutil.rmtree(L.db)  # a half-initialised data dir from an interrupted first start
        L.db.mkdir(parents=True)
        installer = find_programs()["mysql_install_db"]
        log = L.log / "mysql_install_db.log"
        with open(log, "wb") as out:
            try:
                rc = subprocess.run(
                    [installer, "--no-defaults", "--user=root", f"--datadir={L.db}",
                     "--auth-root-authentication-method=socket", "--skip-test-db"],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    timeout=120, check=False, cwd="/",
                ).returncode
            except subprocess.TimeoutExpired:
                rc = -1
        if rc != 0 or not (L.db / "mysql").is_dir():
            shutil.rmtree(L.db, ignore_errors=True)
            raise DevClusterError(
                f"mysql_install_db failed:\n{log_tail(log)}", f"see {log}"
            )

    def _sacctmgr(self, argv: list[str]) -> str:
        res = self.client(timeout_s=20).run(argv, check=False)
        if res.returncode != 0 and "nothing new added" not in (res.stdout + res.stderr).lower():
            raise DevClusterError(
                f"{' '.join(argv)} failed: {(res.stderr or res.stdout).strip()}",
                f"see {self.layout.slurmdbd_log}",
            )
        return res.stdout

    def _sync_accounting(self, plan: ClusterPlan, say: Callable[[str], None]) -> None:
        """Register the cluster (before slurmctld starts), its QOS, accounts and users."""
        say("configuring accounting (cluster, QOS, accounts)")
        show = ["sacctmgr", "-n", "-P", "show"]
        state = config.parse_accounting(
            self._sacctmgr([*show, "cluster", "format=cluster"]),
            self._sacctmgr([*show, "qos", "format=name,maxwall,flags"]),
            self._sacctmgr([*show, "account", "format=account"]),
            self._sacctmgr([*show, "assoc", f"cluster={config.CLUSTER_NAME}",
                            "format=user,account,qos"]),
            self._sacctmgr([*show, "user", "format=user,defaultaccount"]),
        )
        for argv in config.accounting_commands(plan, state, _users()):
            self._sacctmgr(argv)

    def _stop_slurm(self, say: Callable[[str], None]) -> None:
        slurm = [self.slurmctld_daemon(), *(self.slurmd_daemon(n) for n in self._known_nodes())]
        if any(running_pid(d) is not None for d in slurm):
            say("stopping the running slurmctld and slurmd")
        self._cancel_jobs()
        stop(slurm[1:])
        stop(slurm[:1])
        kill_by_environ("slurmstepd", f"SLURM_CONF={self.layout.slurm_conf}")

    def _cancel_jobs(self) -> None:
        """Cancel our jobs while slurmctld still runs, so no job step outlives its slurmd."""
        if running_pid(self.slurmctld_daemon()) is None:
            return
        client = self.client(timeout_s=10)
        try:
            ids = client.run(["squeue", "-h", "-o", "%i"], check=False).stdout.split()
            if ids:
                client.run(["scancel", *ids], check=False)
                wait_until(
                    lambda: not client.run(["squeue", "-h", "-o", "%i"], check=False)
                    .stdout.split(),
                    15.0, "jobs did not end after scancel", "check `squeue`", interval_s=0.5,
                )
        except HpctrainError:
            pass  # best effort: the steps are killed below anyway

    def _start_slurm(self, plan: ClusterPlan, say: Callable[[str], None]) -> None:
        ports = plan.node_ports()
        say("starting slurmctld")
        ctld = self.slurmctld_daemon()
        start(ctld)
        wait_started(ctld, START_TIMEOUT_S, lambda: port_open(self.ports.slurmctld))
        say(f"starting {len(ports)} slurmd ({', '.join(ports)})")
        daemons = [self.slurmd_daemon(n) for n in ports]
        for d in daemons:
            start(d)
        for d, port in zip(daemons, ports.values(), strict=True):
            wait_started(d, START_TIMEOUT_S, lambda p=port: port_open(p))  # type: ignore[misc]

    def _wait_idle(self, plan: ClusterPlan, say: Callable[[str], None]) -> None:
        say("waiting for the nodes to be idle")
        client = self.client(timeout_s=10)
        resumed: set[str] = set()
        last: dict[str, str] = {}

        def check() -> bool:
            try:
                res = client.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
            except HpctrainError:
                return False  # slurmctld busy starting: ask again
            states: dict[str, str] = {}
            for line in res.stdout.splitlines():
                name, _, st = line.partition(" ")
                states[name] = st.strip()
            last.clear()
            last.update(states)
            drained = [n for n, s in states.items()
                       if s.startswith(("drain", "drng", "down")) and not s.endswith("*")
                       and n not in resumed]
            if drained:
                # Drained by an earlier run (e.g. a kill that timed out): jobs would never
                # start there, and ReturnToService does not lift a drain.
                client.run(["scontrol", "update", f"NodeName={','.join(drained)}",
                            "State=RESUME"], check=False)
                resumed.update(drained)
            return all(states.get(n) in ("idle", "mix", "alloc", "comp")
                       for n in plan.node_names)

        try:
            wait_until(check, IDLE_TIMEOUT_S, "the nodes did not become idle",
                       f"see {self.layout.log}/slurmd-*.log and {self.layout.slurmctld_log}",
                       interval_s=0.5)
        except DevClusterError as e:
            try:
                reasons = client.run(["sinfo", "-R"], check=False).stdout.strip()
            except HpctrainError as sinfo_error:
                reasons = str(sinfo_error)
            raise DevClusterError(f"{e.what}: {last}\n{reasons}", e.fix) from None

    # --- down -------------------------------------------------------------------------------

    def down(self, progress: Callable[[str], None] | None = None) -> list[tuple[str, int]]:
        """Stop exactly the daemons this directory's pid files name (and verify as ours)."""
        say = progress or (lambda _msg: None)
        with self._locked():
            self._cancel_jobs()
            nodes = [self.slurmd_daemon(n) for n in self._known_nodes()]
            munged, mysqld, slurmdbd = self.base_daemons()
            stopped: list[tuple[str, int]] = []
            for group in (nodes, [self.slurmctld_daemon()], [slurmdbd], [mysqld], [munged]):
                for name, pid in stop(group):
                    say(f"stopped {name} (pid {pid})")
                    stopped.append((name, pid))
            kill_by_environ("slurmstepd", f"SLURM_CONF={self.layout.slurm_conf}")
            with contextlib.suppress(FileNotFoundError):
                self.layout.munge_socket.unlink()
            state = self.read_state()
            if state:
                state["phase"] = "stopped"
                state["pids"] = {}
                self._write_state(state)
            return stopped


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write_secret(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def _munge_works(sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        cred = subprocess.run(["munge", "-n", "-S", str(sock)], capture_output=True,
                              timeout=5, check=False)
        if cred.returncode != 0:
            return False
        back = subprocess.run(["unmunge", "-S", str(sock)], input=cred.stdout,
                              capture_output=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        return False
    return back.returncode == 0


def _users() -> list[str]:
    """Who submits to the dev cluster: root, the invoking user and the sudo caller."""
    users = ["root"]
    try:
        me: str | None = getpass.getuser()
    except (KeyError, OSError):
        me = None
    for name in (me, os.environ.get("SUDO_USER")):
        if name and name not in users:
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                users.append(name)
    return users


def _ensure_hosts(names: list[str]) -> None:
    """Make the node names resolve (MASTER_ADDR is the first node of a multi-node job)."""
    try:
        text = HOSTS_FILE.read_text()
    except OSError:
        text = ""
    if config.hosts_has_line(text, names):
        return
    line = config.hosts_line(names)
    try:
        # Rewrite in place: /etc/hosts is often a bind mount that cannot be replaced.
        with open(HOSTS_FILE, "r+") as fh:
            current = fh.read()
            fh.seek(0)
            fh.write(config.update_hosts(current, names))
            fh.truncate()
    except OSError as e:
        raise DevClusterError(
            f"cannot add the dev cluster's node names to {HOSTS_FILE} ({e.strerror})",
            f"add this line to {HOSTS_FILE} as root: {line}",
        ) from None

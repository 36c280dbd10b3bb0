"""The dev cluster's daemons: the programs they need, how each is run and recognised."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hpctrain.devcluster.layout import Layout, Ports
from hpctrain.devcluster.processes import Daemon, log_tail, run_captured, run_logged
from hpctrain.errors import DevClusterError

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


@dataclass(frozen=True)
class Daemons:
    """How each daemon of one dev cluster runs, and the marks that prove it is ours."""

    layout: Layout
    ports: Ports

    def munged(self) -> Daemon:
        """Our own munged, on our own key and socket."""
        L = self.layout
        return Daemon(
            name="munged",
            argv=("munged", f"--socket={L.munge_socket}", f"--pid-file={L.munge_pid}",
                  f"--log-file={L.munge_log}", f"--seed-file={L.munge_seed}",
                  f"--key-file={L.munge_key}",
                  # Our key and socket live in the user's tree, whose parent directories
                  # munged would otherwise reject as "insecure" (e.g. a CI checkout).
                  "--force"),
            pid_file=L.munge_pid,
            log_file=L.munge_log,
            programs=("munged",),
            marker=str(L.munge_socket),
        )

    def mysqld(self) -> Daemon:
        """MariaDB for slurmdbd, on loopback and a non-default port."""
        L = self.layout
        return Daemon(
            name="mysqld",
            argv=(
                # --no-defaults must come first: /etc/mysql/my.cnf is the system server's.
                "mysqld", "--no-defaults", "--user=root", f"--datadir={L.db}",
                f"--socket={L.mysql_socket}", f"--pid-file={L.mysql_pid}",
                f"--log-error={L.mysql_log}", f"--init-file={L.mysql_init}",
                "--bind-address=127.0.0.1", f"--port={self.ports.mysqld}",
                "--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
                "--innodb-buffer-pool-size=64M",
                # slurmdbd warns below 900 s: its upgrades hold long locks.
                "--innodb-lock-wait-timeout=900", "--max-connections=50",
            ),
            pid_file=L.mysql_pid,
            log_file=L.mysql_log,
            programs=("mysqld", "mariadbd"),
            marker=f"--datadir={L.db}",
            self_daemonizes=False,
        )

    def slurmdbd(self) -> Daemon:
        """slurmdbd: it has no -f, so its environment names our config."""
        return self._slurm("slurmdbd", ("slurmdbd",), self.layout.slurmdbd_pid,
                           self.layout.slurmdbd_log)

    def slurmctld(self) -> Daemon:
        """The controller."""
        L = self.layout
        return self._slurm("slurmctld", ("slurmctld", "-f", str(L.slurm_conf)),
                           L.slurmctld_pid, L.slurmctld_log)

    def slurmd(self, node: str) -> Daemon:
        """One emulated node's slurmd."""
        L = self.layout
        return self._slurm(f"slurmd:{node}", ("slurmd", "-N", node, "-f", str(L.slurm_conf)),
                           L.slurmd_pid(node), L.slurmd_log(node), exact_arg=node)

    def _slurm(self, name: str, argv: tuple[str, ...], pid_file: Path, log_file: Path,
               exact_arg: str | None = None) -> Daemon:
        conf = str(self.layout.slurm_conf)
        return Daemon(name=name, argv=argv, pid_file=pid_file, log_file=log_file,
                      programs=(argv[0],), marker=f"SLURM_CONF={conf}", exact_arg=exact_arg,
                      env={"SLURM_CONF": conf})

    def base(self) -> list[Daemon]:
        """munged, mysqld and slurmdbd: independent of the emulated profile."""
        return [self.munged(), self.mysqld(), self.slurmdbd()]

    def slurm(self, nodes: list[str]) -> list[Daemon]:
        """slurmctld and the nodes' slurmds."""
        return [self.slurmctld(), *(self.slurmd(n) for n in nodes)]

    def all(self, nodes: list[str]) -> list[Daemon]:
        """Start order; `down` stops them in reverse."""
        return [*self.base(), *self.slurm(nodes)]


def munge_works(sock: Path) -> bool:
    """A credential made on the socket decodes again: munged is up and has our key."""
    if not sock.exists():
        return False
    rc, cred = run_captured(["munge", "-n", "-S", str(sock)])
    return rc == 0 and run_captured(["unmunge", "-S", str(sock)], input=cred)[0] == 0


def database_exists(layout: Layout) -> bool:
    """MariaDB's data directory was initialised (by an earlier `up`)."""
    return (layout.db / "mysql").is_dir()


def init_database(layout: Layout) -> None:
    """Create MariaDB's data directory (the first `up` only)."""
    if layout.db.exists():
        shutil.rmtree(layout.db)  # a half-initialised data dir from an interrupted first start
    layout.db.mkdir(parents=True)
    installer = find_programs()["mysql_install_db"]
    log = layout.mysql_install_log
    # A shell script that hands the data directory to chown unquoted: give it the plain name.
    rc = run_logged([installer, "--no-defaults", "--user=root",
                     f"--datadir={layout.as_named().db}",
                     "--auth-root-authentication-method=socket", "--skip-test-db"],
                    log, timeout_s=120)
    if rc != 0 or not (layout.db / "mysql").is_dir():
        shutil.rmtree(layout.db, ignore_errors=True)
        raise DevClusterError(f"mysql_install_db failed:\n{log_tail(log)}", f"see {log}")

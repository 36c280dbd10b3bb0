"""Where every file and port of the dev cluster is, derived from its one directory (pure)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

# Unix socket paths must stay below the kernel's 108-byte limit. The longest we make is
# slurmstepd's <SlurmdSpoolDir>/<node>_<jobid>.<stepid>, with the node name twice.
_SOCKET_LIMIT = 107
MAX_PREFIX = 10
# prefix + "n" (after a digit) + "g<i>" (a clash) + a two-digit index
MAX_NODE_NAME = MAX_PREFIX + 6
_STEPD_SOCKET = len("/slurmd/") + 2 * MAX_NODE_NAME + len("/_4294967295.4294967295")
# What every config file and shell script takes as written: slurm.conf splits values at spaces
# and cuts comments at '#', gres.conf splits File= at commas, SLURM expands '%', and
# mysql_install_db passes its data directory to chown unquoted.
_PLAIN = re.compile(r"[A-Za-z0-9_./+-]+")


def is_plain(path: Path) -> bool:
    """The path needs no quoting in any config file or shell script."""
    return bool(_PLAIN.fullmatch(str(path)))


@dataclass(frozen=True)
class Ports:
    """Non-default ports, so a system SLURM or MariaDB on this machine is left alone."""

    slurmctld: int = 16817
    slurmdbd: int = 16819
    mysqld: int = 13306
    slurmd_base: int = 17001
    # Not a port, but what keeps the jobs' own ports apart: the batch script derives
    # MASTER_PORT from the job id (20000 + id % 12000), so a second cluster numbers its jobs
    # from a range of its own and two jobs running side by side never pick the same port
    # (clusters at offsets 0, 500, 1000, 1500 and 2000 while each numbers fewer than 2000 jobs).
    first_job_id: int = 1

    def shifted(self, offset: int) -> Ports:
        """Every port moved up by `offset`: a second dev cluster beside the first."""
        return Ports(self.slurmctld + offset, self.slurmdbd + offset, self.mysqld + offset,
                     self.slurmd_base + offset, self.first_job_id + 10 * offset)

    def as_dict(self) -> dict[str, int]:
        """The ports by daemon, as state.json records them."""
        return {
            "slurmctld": self.slurmctld,
            "slurmdbd": self.slurmdbd,
            "mysqld": self.mysqld,
            "slurmd_base": self.slurmd_base,
        }


@dataclass(frozen=True)
class Layout:
    """Every file of the dev cluster, derived from its one directory."""

    root: Path
    socket_dir: Path

    @classmethod
    def for_dir(cls, root: Path) -> Layout:
        """Sockets go under root/run unless that path is too long for unix sockets, or not plain."""
        root = Path(root)
        sockets = root / "run"
        if len(str(sockets)) + _STEPD_SOCKET > _SOCKET_LIMIT or not is_plain(root):
            digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
            sockets = Path("/tmp") / f"hpctrain-{digest}"
        return cls(root=root, socket_dir=sockets)

    @property
    def alias(self) -> Path:
        """A plain symbolic link to root (in the plain socket dir) for a root that is not plain."""
        return self.socket_dir / "home"

    def as_named(self) -> Layout:
        """The layout as config files and programs' argv name it: through the alias if needed."""
        return self if is_plain(self.root) else Layout(self.alias, self.socket_dir)

    @property
    def etc(self) -> Path:
        """Generated config files and secrets."""
        return self.root / "etc"

    @property
    def run(self) -> Path:
        """Pid files (and sockets, unless the directory's path is too long for them)."""
        return self.root / "run"

    @property
    def log(self) -> Path:
        """One log per daemon."""
        return self.root / "log"

    @property
    def spool(self) -> Path:
        """slurmctld's saved state."""
        return self.root / "spool"

    @property
    def db(self) -> Path:
        """MariaDB's data directory."""
        return self.root / "db"

    @property
    def dev(self) -> Path:
        """Empty files standing in for GPU device files in gres.conf."""
        return self.root / "dev"

    @property
    def slurm_conf(self) -> Path:
        """The slurm.conf every daemon and client command of this cluster reads."""
        return self.etc / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        """gres.conf: SLURM reads it from slurm.conf's directory."""
        return self.etc / "gres.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        """slurmdbd.conf: slurmdbd has no -f, it reads this file next to $SLURM_CONF."""
        return self.etc / "slurmdbd.conf"

    @property
    def mysql_init(self) -> Path:
        """SQL that mysqld runs at every start."""
        return self.etc / "mysql-init.sql"

    @property
    def db_secret(self) -> Path:
        """The database password, made once."""
        return self.etc / "db-password"

    @property
    def munge_etc(self) -> Path:
        """Our munge key's directory (mode 700)."""
        return self.etc / "munge"

    @property
    def munge_key(self) -> Path:
        """Our own munge key."""
        return self.munge_etc / "munge.key"

    @property
    def munge_run(self) -> Path:
        """Owned by the munge user: munged writes its socket, pid and seed files here."""
        return self.socket_dir / "munge"

    @property
    def munge_socket(self) -> Path:
        """munged's socket, named in slurm.conf and slurmdbd.conf."""
        return self.munge_run / "munge.socket"

    @property
    def munge_pid(self) -> Path:
        """munged's pid file."""
        return self.munge_run / "munged.pid"

    @property
    def munge_seed(self) -> Path:
        """munged's PRNG seed file."""
        return self.munge_run / "munged.seed"

    @property
    def munge_log_dir(self) -> Path:
        """munged's log directory."""
        return self.log / "munge"

    @property
    def munge_log(self) -> Path:
        """munged's log."""
        return self.munge_log_dir / "munged.log"

    @property
    def mysql_socket(self) -> Path:
        """mysqld's unix socket (SLURM itself connects over TCP)."""
        return self.socket_dir / "mysqld.sock"

    @property
    def mysql_pid(self) -> Path:
        """mysqld's pid file."""
        return self.run / "mysqld.pid"

    @property
    def mysql_log(self) -> Path:
        """mysqld's error log."""
        return self.log / "mysqld.log"

    @property
    def mysql_install_log(self) -> Path:
        """What mysql_install_db printed on the first start."""
        return self.log / "mysql_install_db.log"

    @property
    def slurmdbd_pid(self) -> Path:
        """slurmdbd's pid file."""
        return self.run / "slurmdbd.pid"

    @property
    def slurmdbd_log(self) -> Path:
        """slurmdbd's log."""
        return self.log / "slurmdbd.log"

    @property
    def slurmctld_pid(self) -> Path:
        """slurmctld's pid file."""
        return self.run / "slurmctld.pid"

    @property
    def slurmctld_log(self) -> Path:
        """slurmctld's log."""
        return self.log / "slurmctld.log"

    @property
    def slurmd_spool(self) -> Path:
        """Parent of the per-node spool dirs, which hold slurmstepd's sockets."""
        return self.socket_dir / "slurmd"

    @property
    def state_save(self) -> Path:
        """slurmctld's StateSaveLocation (job ids keep counting across restarts)."""
        return self.spool / "ctld"

    def slurmd_pid(self, node: str) -> Path:
        """One slurmd's pid file (slurm.conf's SlurmdPidFile with %n filled in)."""
        return self.run / f"slurmd-{node}.pid"

    def slurmd_log(self, node: str) -> Path:
        """One slurmd's log (slurm.conf's SlurmdLogFile with %n filled in)."""
        return self.log / f"slurmd-{node}.log"

    @property
    def state_file(self) -> Path:
        """state.json: the emulated profile, nodes, ports and pids."""
        return self.root / "state.json"

    @property
    def lock_file(self) -> Path:
        """Held while an up or down runs."""
        return self.root / ".lock"

    def directories(self) -> tuple[Path, ...]:
        """Every directory `up` creates, parents first."""
        return (self.etc, self.run, self.log, self.spool, self.state_save, self.dev,
                self.socket_dir, self.slurmd_spool, self.munge_run, self.munge_log_dir)

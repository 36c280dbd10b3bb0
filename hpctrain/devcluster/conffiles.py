"""The dev cluster's config files, rendered from templates/devcluster/*.j2, and writing them."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

from hpctrain.devcluster.layout import Layout, Ports
from hpctrain.devcluster.topology import CLUSTER_NAME, ClusterPlan
from hpctrain.errors import DevClusterError
from hpctrain.files.resources import templates_dir
from hpctrain.render import templating
from hpctrain.values.units import format_time

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
# The password goes into SQL and slurmdbd.conf unquoted, so it may only hold safe characters.
_DB_PASSWORD = re.compile(r"[A-Za-z0-9_-]+")


@cache
def _environment() -> jinja2.Environment:
    return templating.environment(
        templates_dir() / "devcluster", {"slurm_time": format_time, "repr": repr}, {"zip": zip}
    )


def _render(name: str, **values: object) -> str:
    return _environment().get_template(name).render(**values)


def render_slurm_conf(plan: ClusterPlan, layout: Layout, hostname: str) -> str:
    """slurm.conf for the emulated cluster; every path lives under the layout."""
    return _render("slurm.conf.j2", plan=plan, layout=layout.as_named(), hostname=hostname,
                   cluster_name=CLUSTER_NAME)


def render_gres_conf(plan: ClusterPlan, layout: Layout) -> str:
    """gres.conf: each emulated GPU backed by an empty file."""
    return _render("gres.conf.j2", plan=plan, layout=layout.as_named())


def render_slurmdbd_conf(layout: Layout, ports: Ports, db_password: str) -> str:
    """slurmdbd.conf (must be mode 600: it holds the database password)."""
    return _render("slurmdbd.conf.j2", layout=layout.as_named(), ports=ports, db_user=DB_USER,
                   db_name=DB_NAME, db_password=_checked_password(db_password))


def render_mysql_init(db_password: str) -> str:
    """SQL mysqld runs at every start (--init-file): the slurm user and its database."""
    return _render("mysql-init.sql.j2", db_user=DB_USER, db_name=DB_NAME,
                   db_password=_checked_password(db_password))


def _checked_password(password: str) -> str:
    if not _DB_PASSWORD.fullmatch(password):
        raise ValueError("database password must be letters, digits, '_' or '-'")
    return password


def gres_device_files(plan: ClusterPlan, layout: Layout) -> list[Path]:
    """The empty files gres.conf names as GPU devices (shared by all nodes on this host)."""
    most = max((g.gpus for g in plan.groups), default=0)
    return [layout.dev / f"gpu{i}" for i in range(most)]


@dataclass(frozen=True)
class SlurmConfigs:
    """The profile-dependent files: `up` compares them with the running cluster's."""

    slurm_conf: str
    gres_conf: str

    @classmethod
    def render(cls, plan: ClusterPlan, layout: Layout, hostname: str) -> SlurmConfigs:
        """Render both files for this plan."""
        return cls(render_slurm_conf(plan, layout, hostname), render_gres_conf(plan, layout))

    def written_in(self, layout: Layout) -> bool:
        """The layout's files hold exactly these texts."""
        return (_read(layout.slurm_conf) == self.slurm_conf
                and _read(layout.gres_conf) == self.gres_conf)


def write_files(plan: ClusterPlan, layout: Layout, configs: SlurmConfigs) -> None:
    """Create the directory tree, the secrets (once) and every config file `up` needs."""
    layout.socket_dir.mkdir(parents=True, exist_ok=True)
    _check_socket_dir(layout)
    for d in layout.directories():
        d.mkdir(parents=True, exist_ok=True)
    # Other users' sbatch must reach the munge socket; nothing here is secret but the
    # key and the database password, which get 0600/0400 below.
    for d in (layout.root, layout.run, layout.socket_dir, layout.munge_run):
        d.chmod(0o755)
    _link_alias(layout)
    layout.munge_etc.mkdir(mode=0o700, exist_ok=True)
    if not layout.munge_key.is_file():
        _write_secret(layout.munge_key, os.urandom(1024), 0o400)
    if not layout.db_secret.is_file():
        _write_secret(layout.db_secret, secrets.token_urlsafe(18).encode(), 0o600)
    password = layout.db_secret.read_text().strip()
    layout.slurm_conf.write_text(configs.slurm_conf)
    layout.gres_conf.write_text(configs.gres_conf)
    _write_secret(layout.slurmdbd_conf,
                  render_slurmdbd_conf(layout, plan.ports, password).encode(), 0o600)
    _write_secret(layout.mysql_init, render_mysql_init(password).encode(), 0o600)
    for f in gres_device_files(plan, layout):
        f.touch(exist_ok=True)


def _check_socket_dir(layout: Layout) -> None:
    """A socket dir outside root (in /tmp) must be ours: root follows the links in it."""
    if layout.socket_dir.is_relative_to(layout.root):
        return
    st = layout.socket_dir.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise DevClusterError(
            f"{layout.socket_dir} (the dev cluster's socket directory) belongs to another "
            "user or is not a directory",
            f"remove it (sudo rm -rf {shlex.quote(str(layout.socket_dir))}), then run `up` again",
        )


def _link_alias(layout: Layout) -> None:
    """Point the plain alias at root, so config files never hold root's own characters."""
    named = layout.as_named()
    if named.root == layout.root:
        return
    alias = named.root
    if alias.is_symlink() and alias.readlink() == layout.root:
        return
    if alias.is_symlink() or alias.exists():
        alias.unlink()
    alias.symlink_to(layout.root, target_is_directory=True)


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

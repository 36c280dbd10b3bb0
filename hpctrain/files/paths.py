"""Where hpctrain keeps its files; HPCTRAIN_HOME overrides all of them."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The root of hpctrain's user files."""
    override = os.environ.get("HPCTRAIN_HOME")
    if override:
        return Path(override).expanduser()
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "hpctrain"


def config_dir() -> Path:
    """User configuration (profiles); under HPCTRAIN_HOME when set, else XDG_CONFIG_HOME."""
    if os.environ.get("HPCTRAIN_HOME"):
        return home() / "config"
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hpctrain"


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def state_dir() -> Path:
    """Job history, dev-cluster state, run directories."""
    return home() / "state"


def history_db() -> Path:
    return state_dir() / "history.sqlite3"


def devcluster_dir() -> Path:
    return state_dir() / "devcluster"


def runs_dir() -> Path:
    return state_dir() / "runs"


def slurm_conf_pointer() -> Path:
    """A one-line file naming the slurm.conf of the local SLURM that hpctrain started."""
    return state_dir() / "slurm-conf"


def published_slurm_conf() -> Path | None:
    """The slurm.conf the pointer file names, if there is a pointer and that file exists."""
    try:
        named = slurm_conf_pointer().read_text().strip()
    except OSError:
        return None
    return Path(named) if named and Path(named).is_file() else None

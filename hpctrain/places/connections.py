"""Which login a profile or a recorded job goes through (its connection), and what
`hpctrain login` opens, checks and closes."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from hpctrain.remote.connection import Connection, Target

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.profiles.model import Profile


def connection(target: Target, name: str | None = None) -> Connection:
    """The connection to `target`; `name` is what `hpctrain login` must be given to open it."""
    if name is None:
        name = target.host
        if target.ssh_config:
            name += f" --ssh-config {shlex.quote(target.ssh_config)}"
    return Connection(target, name)


def profile_connection(profile: Profile, override: str | None) -> Connection | None:
    """The profile's login (its host replaced by --login DEST); None for a local profile."""
    login = profile.login
    if override is None and login is None:
        return None
    config = login.ssh_config if login else None
    if override is not None and override != (login.host if login else None):
        return connection(Target.of(override, config))
    assert login is not None
    return connection(Target.of(login.host, config), profile.name)


def for_name(name: str, ssh_config: str | None = None) -> Connection:
    """`hpctrain login NAME`: a profile with a login section, else an ssh destination."""
    from hpctrain.errors import ProfileError
    from hpctrain.profiles import load_profile

    if ssh_config is None and not name.startswith("-"):
        try:
            profile = load_profile(name)
        except ProfileError:
            profile = None
        if profile is not None and profile.login is not None:
            return profile_connection(profile, None) or connection(Target.of(name))
    return connection(Target.of(name, ssh_config))


def login_state(conn: Connection, close: bool) -> dict[str, object]:
    """Whether the login's master is open (`close`: after closing it, and whether it was)."""
    was_open = conn.close() if close else conn.alive()
    return {"login": conn.target.host, "socket": str(conn.socket),
            "open": was_open and not close, "closed": close and was_open}


def open_login(conn: Connection, persist: str) -> dict[str, object]:
    """Open the login's master (or reuse it); what it is and what the remote side says."""
    opened = conn.open(persist)
    facts = conn.facts()
    return {"login": conn.target.host, "socket": str(conn.socket), "opened": opened,
            "persist": persist, "cluster": facts["cluster"] or None,
            "remote_home": facts["home"], "remote_user": facts["user"]}


def record_connection(record: JobRecord, override: str | None = None) -> Connection | None:
    """The connection a job was submitted through (`override`: another destination for its
    login); None for a job submitted here."""
    if override is not None:
        return connection(Target.of(override, record.login_config))
    if not record.login:
        return None
    target = Target(record.login, record.login_config)
    return connection(target, record.profile if _profile_target(record.profile) == target
                      else None)


def _profile_target(name: str) -> Target | None:
    """The target of profile `name`'s login section, if it loads and has one."""
    from hpctrain.errors import HpctrainError
    from hpctrain.profiles import load_profile

    try:
        login = load_profile(name).login
        return Target.of(login.host, login.ssh_config) if login else None
    except HpctrainError:
        return None

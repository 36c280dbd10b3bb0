"""Submit from a laptop: sync the project, render with the remote's facts, sbatch there."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.remote import site as sites
from hpctrain.remote import sync as syncing
from hpctrain.remote.connection import Connection

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hpctrain.history import History
    from hpctrain.jobs.alternatives import Race, RaceSubmitted
    from hpctrain.jobs.prepare import Prepared
    from hpctrain.jobs.submit import Submitted
    from hpctrain.plan import JobRequest
    from hpctrain.units import Topology


@dataclass(frozen=True)
class RemoteSubmission:
    """What a submission through a login did: the job, its plan, and what was synced."""

    submitted: Submitted
    prep: Prepared
    synced: syncing.SyncReport
    round_trips: int


def python_env(choice: str | None, login_python: str | None) -> str | None:
    """The remote environment jobs activate: --python-env, else login.python; 'none': none."""
    if choice == "none":
        return None
    return choice or login_python


def remote_request(req: JobRequest, conn: Connection, python_choice: str | None) -> JobRequest:
    """The request with the remote's facts: its Python environment, `~` as the remote home."""
    login = req.profile.login
    output_dir = req.profile.output_dir
    if output_dir.startswith("~"):
        output_dir = conn.absolute(output_dir)
    profile = dataclasses.replace(req.profile, output_dir=output_dir)
    remote_python = python_env(python_choice, login.python if login else None)
    return dataclasses.replace(req, profile=profile, python_env=remote_python)


@dataclass(frozen=True)
class RemoteRace:
    """What a `--first-of` race through a login did: the alternatives, and what was synced."""

    submitted: RaceSubmitted
    synced: syncing.SyncReport
    round_trips: int


def _site(req: JobRequest, conn: Connection, local_root: Path) -> sites.RemoteSite:
    from hpctrain.jobs.submit import git_state

    workdir = sites.remote_workdir(conn, req.profile.login, local_root)
    return sites.RemoteSite(conn, local_root, workdir, git_state(local_root))


def prepare_remote(req: JobRequest, conn: Connection, local_root: Path
                   ) -> tuple[Prepared, sites.RemoteSite]:
    """The submission as a value, with the run directory under the remote work directory."""
    from hpctrain.jobs.prepare import prepare

    site = _site(req, conn, local_root)
    prep = prepare(req, Path(site.workdir), environ=os.environ)
    _check_configs(prep, site)
    return prep, site


def prepare_race_remote(req: JobRequest, shapes: Sequence[Topology], conn: Connection,
                        local_root: Path) -> tuple[Race, sites.RemoteSite]:
    """Every alternative of a race as a value, sharing one run directory at the login."""
    from hpctrain.jobs.alternatives import prepare_race

    site = _site(req, conn, local_root)
    race = prepare_race(req, shapes, Path(site.workdir), environ=os.environ)
    _check_configs(race.alternatives[0], site)
    return race, site


def _check_configs(prep: Prepared, site: sites.RemoteSite) -> None:
    """A --config file is read from the laptop's copy: refuse a bad one before syncing."""
    from hpctrain.errors import HpctrainError
    from hpctrain.trainconfig import load_config

    for f in prep.files:
        if f.copy_of is not None:
            local = site.local_copy(f.copy_of)
            if not local.is_file():
                raise HpctrainError(f"--config {local} does not exist", "check the path")
            load_config(local)


def _excluded(output_dir: str) -> tuple[str, ...]:
    # Run outputs of earlier local runs inside the project are not sent again.
    rel = output_dir.strip("/")
    return () if output_dir.startswith(("/", "~")) or not rel else (f"/{rel}/",)


def submit_remote(req: JobRequest, conn: Connection, local_root: Path, history: History,
                  python_choice: str | None) -> RemoteSubmission:
    """Sync `local_root` to the login's work directory and submit there; record it here."""
    from hpctrain.jobs.submit import submit

    conn.require()
    req = remote_request(req, conn, python_choice)
    prep, site = prepare_remote(req, conn, local_root)
    synced = syncing.sync(conn, local_root, site.workdir, _excluded(req.profile.output_dir))
    client = sites.slurm_client(conn)
    done = submit(prep, client, history, site, user=conn.facts()["user"])
    return RemoteSubmission(done, prep, synced, conn.round_trips)


def submit_race_remote(req: JobRequest, shapes: Sequence[Topology], conn: Connection,
                       local_root: Path, history: History, python_choice: str | None
                       ) -> RemoteRace:
    """Sync `local_root` to the login's work directory and queue the race there; record it."""
    from hpctrain.jobs.alternatives import submit_race

    conn.require()
    req = remote_request(req, conn, python_choice)
    race, site = prepare_race_remote(req, shapes, conn, local_root)
    synced = syncing.sync(conn, local_root, site.workdir, _excluded(req.profile.output_dir))
    done = submit_race(race, sites.slurm_client(conn), history, site,
                       user=conn.facts()["user"])
    return RemoteRace(done, synced, conn.round_trips)

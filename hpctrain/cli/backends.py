"""The SLURM client and the job history as the commands get them (imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import LocalPlace, Place
    from hpctrain.profiles.model import Profile
    from hpctrain.slurm.client import SlurmClient


def slurm() -> tuple[SlurmClient, str]:
    """The one SLURM client and the name of the cluster it talks to ('' if unknown)."""
    from hpctrain.slurm.client import SlurmClient

    client = SlurmClient.from_environment()
    return client, client.cluster_name() or ""


def history() -> History:
    """The job history in the user's state directory."""
    from hpctrain.history import History

    return History()


def local_place() -> LocalPlace:
    """This machine as a place, its SLURM client from `slurm()` (which tests replace)."""
    from hpctrain.places import LocalPlace

    return LocalPlace(lambda: slurm()[0])


def place_for(of: Profile | JobRecord, login: str | None = None,
              python_choice: str | None = None) -> Place:
    """The place of a profile or a recorded job (places.place_for), this machine's as above."""
    from hpctrain import places

    return places.place_for(of, local_place(), login, python_choice)

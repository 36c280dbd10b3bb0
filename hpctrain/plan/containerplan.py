"""The container a job's ranks run in, as the plan decided it (plan/container.py decides it):
a value of its own, so that the plan's model can hold it without importing the rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpctrain.profiles.model import RuntimeName

PythonChoice = Literal["job", "image"]
PYTHON_CHOICES: tuple[PythonChoice, ...] = ("job", "image")


def image_is_path(runtime: RuntimeName, image: str) -> bool:
    """`image` names a path on the node under `runtime` (not pyxis's registry name, nor a
    docker:// URI)."""
    return runtime != "pyxis" and "://" not in image


@dataclass(frozen=True)
class ContainerPlan:
    """The container every rank runs in, decided: nothing is left for the template to choose."""

    runtime: RuntimeName
    image: str
    # The user's binds as SRC:DST (DST may be left out: the same path inside).
    binds: tuple[str, ...]
    # The job has GPUs: Apptainer's --nv (pyxis and Charliecloud need no flag here).
    gpus: bool
    # "job": the job's own Python environment is bound in; "image": the image's own Python.
    python: PythonChoice
    modules: tuple[str, ...] = ()

    @property
    def bind_flag(self) -> str:
        """The runtime's flag for one bind (pyxis takes them all in one option instead)."""
        return {"charliecloud": "-b", "apptainer": "--bind", "pyxis": ""}[self.runtime]

    @property
    def program(self) -> str:
        """The runtime's program on the node (pyxis: srun's plugin, run by srun itself)."""
        return {"charliecloud": "ch-run", "apptainer": "apptainer", "pyxis": "srun"}[self.runtime]

    @property
    def image_is_path(self) -> bool:
        """The image is a path on the node (not pyxis's registry name, nor a docker:// URI)."""
        return image_is_path(self.runtime, self.image)

    def head(self) -> tuple[str, ...]:
        """The wrapper's words before the binds (none for pyxis: srun's own options)."""
        if self.runtime == "charliecloud":
            return ("ch-run",)
        if self.runtime == "apptainer":
            return ("apptainer", "exec", *(("--nv",) if self.gpus else ()))
        return ()

    def tail(self) -> tuple[str, ...]:
        """The wrapper's words after the binds: the image, and the end of the runtime's options."""
        if self.runtime == "charliecloud":
            # ch-run's own option parser stops at --; a command's options stay the command's.
            return (self.image, "--")
        if self.runtime == "apptainer":
            return (self.image,)
        return ()

    def srun_options(self) -> tuple[str, ...]:
        """pyxis's srun options (NVIDIA/pyxis README): the image, the variables kept from the
        batch step over the image's own. The binds follow as --container-mounts."""
        if self.runtime != "pyxis":
            return ()
        keep = "PATH,PYTHONPATH" if self.python == "job" else "PYTHONPATH"
        return (f"--container-image={self.image}", f"--container-env={keep}")

    def summary(self) -> dict[str, object]:
        """The container as shown next to the plan and in --json output."""
        return {"runtime": self.runtime, "image": self.image, "binds": list(self.binds),
                "gpus": self.gpus, "python": self.python}

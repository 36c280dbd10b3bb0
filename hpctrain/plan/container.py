"""Jobs in containers (`--container`, docs/containers.md): which runtime runs each rank, what it
binds in, and the words that wrap a rank's command.

The batch script, the monitor, the stall watch, the signals and the requeue stay outside; only
each rank's process runs inside. The rank variables are set outside (srun's `sh -c`) and pass
in with the environment; the run directory, the code snapshot and, by default, the job's own
Python environment are bound in at their own paths (the template adds the paths the node
decides: the interpreter the environment links to, hpctrain's package for the rank hook).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import PurePath

from hpctrain.plan.containerplan import PYTHON_CHOICES, ContainerPlan, image_is_path
from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import CONTROL


def container_policy(req: JobRequest, gpus_per_node: int) -> Outcome[ContainerPlan | None]:
    """The container the ranks run in, checked against what the profile's cluster offers."""
    if req.container is None:
        extra = [flag for flag, given in (("--container-runtime", req.container_runtime),
                                          ("--container-bind", req.container_binds),
                                          ("--container-python", req.container_python))
                 if given]
        if extra:
            return Outcome(None, (f"{extra[0]} applies to a job in a container: give "
                                  "--container IMAGE too",))
        return Outcome(None)
    offered = req.profile.containers
    runtime = offered.runtime(req.container_runtime)
    if runtime is None:
        names = ", ".join(r.name for r in offered.runtimes)
        where = (f"it offers {names}" if names else
                 "it offers none (a profile's `containers: runtimes:` names them)")
        asked = req.container_runtime or "a container runtime"
        return Outcome(None, (f"--container: profile {req.profile.name} does not offer "
                              f"{asked}; {where}",))
    python = req.container_python or "job"
    problems = [*_image_problems(req.container), *_bind_problems(req.container_binds)]
    if python not in PYTHON_CHOICES:
        problems.append(f"--container-python {python}: give job (the job's own environment, "
                        "bound in) or image (the image's own Python)")
    plan = ContainerPlan(runtime=runtime.name, image=req.container,
                         binds=tuple(req.container_binds), gpus=gpus_per_node > 0,
                         python="image" if python == "image" else "job",
                         modules=tuple(runtime.modules))
    return Outcome(plan, tuple(problems))


def anchored(req: JobRequest, workdir: PurePath) -> JobRequest:
    """`req` with a relative image path made absolute at `workdir`, the project at the place:
    the job's ranks start in its code snapshot, which need not hold the image (a snapshot
    leaves large files out), and submit checks the path there as the job will read it."""
    image = req.container
    if not image or image.startswith(("/", "~/")) or CONTROL.search(image):
        return req
    runtime = req.profile.containers.runtime(req.container_runtime)
    # The plan's own rule of what is a path (not pyxis's registry name, not a docker:// URI).
    if runtime is None or not image_is_path(runtime.name, image):
        return req
    return dataclasses.replace(req, container=str(workdir / image))


def _image_problems(image: str) -> list[str]:
    if not image:
        return ["--container: give the image's path (or, with pyxis, its name)"]
    if CONTROL.search(image):
        return [f"--container {image!r}: the image's name has a control character"]
    return []


def _bind_problems(binds: Sequence[str]) -> list[str]:
    problems = []
    for bind in binds:
        src, _, dst = bind.partition(":")
        if not src.startswith("/") or (dst and not dst.startswith("/")):
            problems.append(f"--container-bind {bind!r}: give SRC:DST as absolute paths (or "
                            "SRC alone: the same path inside)")
        elif CONTROL.search(bind) or "," in bind:
            # pyxis joins its mounts with commas; a comma inside one would split it.
            problems.append(f"--container-bind {bind!r}: a path with a comma or a control "
                            "character cannot be bound")
    return problems

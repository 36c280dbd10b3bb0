"""The why rule of a container that could not start the ranks (docs/containers.md): the job's
training never began, so the fix is the container's (image, runtime, binds), not the code's."""

from __future__ import annotations

from hpctrain.diagnosis.facts import first, with_task
from hpctrain.diagnosis.model import Diagnosis, Evidence
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState

# what -> (the summary, with {path}; the fix)
_SAID = {
    "image_missing": (
        "the container image does not exist on the node: {path}",
        "give --container the image's path as the nodes see it (a shared filesystem, not the "
        "login's /tmp), or make the image there"),
    "runtime_missing": (
        "the container runtime `{path}` is not on the node's PATH",
        "load its module (the profile's `containers: runtimes:` entry takes `modules:`), or "
        "pick a runtime the cluster has with --container-runtime"),
    "bind_missing": (
        "a path bound into the container does not exist on the node: {path}",
        "give --container-bind a SRC that exists on the nodes"),
    "bind_target_missing": (
        "the image has no directory to mount a bind on, and it is read-only: {path}",
        "make that directory in the image (`mkdir -p IMAGE/PATH`; scripts/container-image.sh "
        "does so for the dev cluster's image), or bind to a DST the image has"),
    "command_missing": (
        "the rank's command is not in the container: {path}",
        "with --container-python image the image's own python must be on PATH (or name it "
        "in the command); without it the job's own environment is bound in"),
    "user_unset": (
        "ch-run refused to start: $USER is not set in the job",
        "export USER in the job (hpctrain's script does so for ch-run; a script of one's own "
        "must too)"),
}


def container(ev: Evidence, last: Row) -> Diagnosis | None:
    """The container could not start a rank: its own error, before any training."""
    found = first(ev, "container")
    if found is None or last.state is JobState.COMPLETED:
        return None
    what = found.info.get("what", "other")
    summary, fix = _SAID.get(what, (
        "the container runtime could not start the rank: {path}",
        "read the runtime's message: `hpctrain logs JOB`; docs/containers.md lists the "
        "common ones"))
    return Diagnosis("container", "the ranks never started: " + summary.format(
        path=found.info.get("path", "?")), fix, evidence=with_task(ev, found))

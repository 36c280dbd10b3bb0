"""Rule: `--global-batch N` for the packaged trainer, checked against the job's world size."""

from __future__ import annotations

from hpctrain.errors import ConfigError
from hpctrain.plan.model import TRAINER_COMMAND, JobRequest
from hpctrain.plan.outcome import Outcome


def world_size(req: JobRequest, nodes: int, gpus_per_node: int, tasks_per_node: int) -> int:
    """Training processes of the job: one per task (Lightning), per GPU or node (torchrun)."""
    return nodes * (tasks_per_node if req.launcher == "lightning" else max(gpus_per_node, 1))


def global_batch_args(req: JobRequest, command: tuple[str, ...], world: int
                      ) -> Outcome[tuple[str, ...]]:
    """The trainer options that fix the effective batch, or the problem with them."""
    n, cap = req.global_batch, req.max_device_batch
    if n is None:
        problems = ("--max-device-batch needs --global-batch N",) if cap is not None else ()
        return Outcome((), problems)
    if command[:len(TRAINER_COMMAND)] != TRAINER_COMMAND:
        return Outcome((), ("--global-batch applies to the packaged trainer; give your own "
                            "command its batch size in its own options",))
    from hpctrain.batching import split_batch

    try:
        split = split_batch(n, world, cap)
    except ConfigError as e:
        return Outcome((), (f"--global-batch {n}: {e.what}; {e.fix}",))
    note = (f"global batch {n} = {split.per_device} per device x {world} device(s)"
            f" x {split.accumulation} accumulated step(s)")
    args = ("--global-batch", str(n), *(("--max-device-batch", str(cap)) if cap else ()))
    return Outcome(args, notes=(note,))

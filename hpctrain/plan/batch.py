"""Rule: the packaged trainer's `trainer.global_batch`, checked against the job's world size.

The setting may come from a config file, `--set`, the trainer's `--global-batch` or submit's:
the request holds it resolved (JobRequest.trainer), and the trainer splits it again at run time
by the same rule (hpctrain/values/batching.py).
"""

from __future__ import annotations

from hpctrain.errors import ConfigError
from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome


def global_batch_problems(req: JobRequest, world: int) -> Outcome[None]:
    """The split of the global batch over this job's world size (a note), or why it fails."""
    t = req.trainer.trainer if req.trainer is not None else None
    if t is None or t.global_batch is None:
        cap = t is not None and t.max_device_batch is not None
        return Outcome(None, ("--max-device-batch needs --global-batch N "
                              "(trainer.max_device_batch applies with trainer.global_batch)",)
                       if cap else ())
    from hpctrain.values.batching import split_batch

    n = t.global_batch
    try:
        split = split_batch(n, world, t.max_device_batch, t.accumulate_grad_batches)
    except ConfigError as e:
        return Outcome(None, (f"trainer.global_batch {n}: {e.what}; {e.fix}",))
    note = (f"global batch {n} = {split.per_device} per device x {world} device(s)"
            f" x {split.accumulation} accumulated step(s)")
    return Outcome(None, notes=(note,))

"""Rule: the packaged trainer's settings that only the job's shape can refute, checked at render.

`trainer.cuda_graphs: true` makes the trainer stop at start-up where CUDA graphs cannot apply
(docs/trainer.md); two of those reasons are known before the job queues: no GPU, and more than one
training process (DDP). Saying so here spares the wait in the queue. The setting is read from the
request's resolved settings, wherever it was made (a file, `--set`).
"""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome

GRAPHS_KEY = "trainer.cuda_graphs"


def cuda_graphs_problems(req: JobRequest, world: int, gpus_per_node: int) -> Outcome[None]:
    """A forced `trainer.cuda_graphs: true` on a job without a GPU or with several processes."""
    if req.trainer is None or req.trainer.trainer.cuda_graphs is not True:
        return Outcome(None)
    fix = f"leave {GRAPHS_KEY} auto: it uses them wherever they apply"
    if gpus_per_node == 0:
        return Outcome(None, (f"{GRAPHS_KEY}=true needs a GPU; this job has none: {fix}",))
    if world > 1:
        return Outcome(None, (
            f"{GRAPHS_KEY}=true needs one training process on one GPU; this job has "
            f"{world} (DDP's gradient all-reduce is not captured in a graph): {fix}",))
    return Outcome(None)

"""Rule: the packaged trainer's options that only the job's shape can refute, checked at render.

`--set trainer.cuda_graphs=true` makes the trainer stop at start-up where CUDA graphs cannot apply
(docs/trainer.md); two of those reasons are known before the job queues: no GPU, and more than one
training process (DDP). Saying so here spares the wait in the queue.
"""

from __future__ import annotations

from typing import Any

from hpctrain.plan.model import TRAINER_COMMAND
from hpctrain.plan.outcome import Outcome

GRAPHS_KEY = "trainer.cuda_graphs"


def _set_values(command: tuple[str, ...], key: str) -> list[str]:
    """The raw values of `--set KEY=VALUE` (or `--set=KEY=VALUE`) in a trainer command line."""
    values = []
    for i, arg in enumerate(command):
        item = command[i + 1] if arg == "--set" and i + 1 < len(command) else (
            arg.removeprefix("--set=") if arg.startswith("--set=") else "")
        if item.startswith(f"{key}="):
            values.append(item.split("=", 1)[1])
    return values


def _yaml_value(raw: str) -> Any:
    """The value as the trainer reads a --set value (YAML); None where it is not valid YAML."""
    # Imported here: render loads no YAML unless a profile changed, and most commands have no
    # --set of this key.
    import yaml

    from hpctrain import yamlfile

    try:
        return yamlfile.load(raw)
    except (yamlfile.YamlInputError, yaml.YAMLError):
        return None  # the trainer's own validation names the bad value


def cuda_graphs_problems(command: tuple[str, ...], world: int, gpus_per_node: int
                         ) -> Outcome[None]:
    """A forced `trainer.cuda_graphs=true` on a job without a GPU or with several processes."""
    if command[:len(TRAINER_COMMAND)] != TRAINER_COMMAND:
        return Outcome(None)
    values = _set_values(command, GRAPHS_KEY)
    if not values or _yaml_value(values[-1]) is not True:
        return Outcome(None)
    fix = f"leave {GRAPHS_KEY} auto: it uses them wherever they apply"
    if gpus_per_node == 0:
        return Outcome(None, (f"--set {GRAPHS_KEY}=true needs a GPU; this job has none: {fix}",))
    if world > 1:
        return Outcome(None, (
            f"--set {GRAPHS_KEY}=true needs one training process on one GPU; this job has "
            f"{world} (DDP's gradient all-reduce is not captured in a graph): {fix}",))
    return Outcome(None)

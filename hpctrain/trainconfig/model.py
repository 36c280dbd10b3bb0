"""The trainer's settings checked against the task registry: `TrainConfig`, the settings'
fields (`hpctrain/trainsettings/`) with a known task and that task's own rules.

Loaded by `trainconfig/load.py`; read by the trainer and, before a job queues, by the job side.
"""

from __future__ import annotations

from pydantic import field_validator, model_validator

from hpctrain.tasks import registry
from hpctrain.trainsettings.sections import TrainSettings

# The task names, from the registry (hpctrain/tasks/).
TASKS: tuple[str, ...] = registry.names()


class TrainConfig(TrainSettings):
    """A complete, validated trainer configuration."""

    task: str = registry.DEFAULT_TASK

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        if task not in TASKS:
            quoted = [repr(name) for name in TASKS]
            raise ValueError(f"Input should be {', '.join(quoted[:-1])} or {quoted[-1]}")
        return task

    @model_validator(mode="after")
    def _batches_per_call(self) -> TrainConfig:
        if registry.get(self.task).builtin_step:
            return self
        if self.trainer.batches_per_call not in ("auto", 1):
            raise ValueError(
                "trainer.batches_per_call applies to the built-in tasks only (a custom module's "
                "training_step takes one batch); leave it auto"
            )
        if self.trainer.cuda_graphs is True:
            raise ValueError(
                "trainer.cuda_graphs applies to the built-in tasks only (a custom module's step "
                "is its own); leave it auto"
            )
        return self

    @model_validator(mode="after")
    def _task_rules(self) -> TrainConfig:
        # The task's own checks (task custom: its class paths).
        validate = registry.get(self.task).validate
        if validate is not None:
            validate(self)
        return self

"""The global batch split (pure): the same effective batch on every topology."""

from __future__ import annotations

import pytest

from hpctrain.errors import ConfigError
from hpctrain.values.batching import BatchSplit, split_batch


@pytest.mark.parametrize(("world", "cap", "per", "acc"), [
    (1, None, 64, 1), (2, None, 32, 1), (4, None, 16, 1),
    (1, 16, 16, 4), (2, 16, 16, 2), (4, 16, 16, 1), (4, 10, 8, 2), (3 * 7, None, None, None),
])
def test_64_on_every_topology(world: int, cap: int | None, per: int | None,
                              acc: int | None) -> None:
    if per is None:
        with pytest.raises(ConfigError):
            split_batch(64, world, cap)
        return
    split = split_batch(64, world, cap)
    assert split == BatchSplit(64, world, per, acc or 1)
    assert split.as_dict()["effective_batch_size"] == 64


def test_refusal_names_the_nearest_valid_batches() -> None:
    with pytest.raises(ConfigError) as e:
        split_batch(64, 3)
    assert "multiple of 3" in e.value.what and e.value.fix == "use a global batch of 63 or 66"


def test_fixed_accumulation_is_kept_or_refused() -> None:
    assert split_batch(64, 2, accumulation=4) == BatchSplit(64, 2, 8, 4)
    with pytest.raises(ConfigError) as e:
        split_batch(64, 2, max_device_batch=4, accumulation=4)
    assert e.value.fix == "use a global batch of 32"
    with pytest.raises(ConfigError) as e:
        split_batch(60, 4, accumulation=8)
    assert e.value.fix == "use a global batch of 32 or 64"


@pytest.mark.parametrize("bad", [(0, 1), (64, 0), (64, 1, 0), (64, 1, None, 0)])
def test_non_positive_values_are_refused(bad: tuple[int, ...]) -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        split_batch(*bad)


def _plan(nodes: int, gpus: int, sets: tuple[str, ...] = (), **kw: object) -> tuple[str, ...]:
    from hpctrain.plan import JobRequest, build_plan
    from hpctrain.profiles import load_profile
    from hpctrain.trainconfig.load import load_config

    trainer = load_config(overrides=list(sets)) if sets else None
    req = JobRequest(profile=load_profile("local"), nodes=nodes, gpus_per_node=gpus,
                     trainer=trainer, **kw)  # type: ignore[arg-type]
    return build_plan(req).command


def test_plan_passes_the_global_batch_to_the_trainer() -> None:
    command = _plan(2, 2, ("trainer.global_batch=64", "trainer.max_device_batch=8"))
    assert command[-4:] == ("--set", "trainer.global_batch=64",
                            "--set", "trainer.max_device_batch=8")
    assert not any("global_batch" in arg for arg in _plan(1, 1))


@pytest.mark.parametrize(("sets", "says"), [
    (("trainer.global_batch=65",), "use a global batch of 64 or 68"),
    (("trainer.max_device_batch=8",), "--max-device-batch needs --global-batch"),
])
def test_plan_refuses_what_cannot_work(sets: tuple[str, ...], says: str) -> None:
    from hpctrain.errors import PlanError

    with pytest.raises(PlanError) as e:
        _plan(2, 2, sets)
    assert any(says in p for p in e.value.problems)


def test_global_batch_for_a_foreign_command_is_refused() -> None:
    from typer.testing import CliRunner

    from hpctrain.cli import app

    res = CliRunner().invoke(app, ["render", "-P", "local", "--global-batch", "64", "--",
                                   "python", "train.py"])
    # In process, the error boundary's message is the exception's.
    assert res.exit_code == 1 and res.exception is not None, res.output
    assert "applies to the packaged trainer" in str(res.exception)


def test_every_launcher_counts_one_process_per_gpu() -> None:
    from hpctrain.plan.launchers import LAUNCHERS

    for mode in LAUNCHERS.values():
        assert mode.workers_per_node(2) == 2 and mode.workers_per_node(0) == 1, mode.name
    assert [m.tasks_per_node(4) for m in LAUNCHERS.values()] == [4, 1, 1]

"""The task registry: its entries, their light import, and the config's use of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpctrain.errors import ConfigError
from hpctrain.tasks import registry
from hpctrain.trainconfig.load import load_config
from hpctrain.trainconfig.model import TASKS


def test_the_registry_lists_the_task_modules() -> None:
    assert registry.names() == ("custom", "fashionmnist", "mnist", "spiral", "synthcifar")
    assert registry.names() == TASKS == tuple(registry.all_tasks())
    for name, task in registry.all_tasks().items():
        assert task.name == name and task.summary and "\n" not in task.summary
        assert task.defaults()["task"] == name
    # The defaults layer is a copy: a load that merges into it leaves the declaration as it was.
    registry.get("spiral").defaults()["model"]["hidden"].append(1)
    assert registry.get("spiral").defaults()["model"]["hidden"] == [64, 32, 16]


def test_task_modules_import_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from hpctrain.tasks import registry\n"
        "registry.all_tasks()\n"
        "heavy = ('torch', 'lightning', 'numpy', 'pydantic', 'yaml')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"


def test_the_files_to_fetch_come_from_the_declarations() -> None:
    from hpctrain.tasks.parts.datasets.fetch import DATASETS

    assert set(DATASETS) == {"mnist", "fashionmnist"}
    assert DATASETS["mnist"] is registry.get("mnist").data_files


def test_a_task_the_registry_lacks_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(task="cifar")
    assert "unknown task 'cifar'" in e.value.what
    assert "custom, fashionmnist, mnist, spiral, synthcifar" in str(e.value)


def test_errors_from_a_tasks_defaults_name_them() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(task="custom")
    assert "custom's defaults: (top level): custom.module is required for task custom" in str(
        e.value
    )

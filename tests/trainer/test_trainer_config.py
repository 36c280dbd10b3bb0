"""Config loading: shipped defaults, layering, overrides and one error line per bad field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpctrain.errors import ConfigError
from hpctrain.trainconfig.load import (
    dump_config,
    load_config,
    parse_override,
)
from hpctrain.trainconfig.options import parse_call


@pytest.mark.parametrize("task", ["spiral", "mnist", "fashionmnist", "synthcifar"])
def test_shipped_defaults_load(task: str) -> None:
    config = load_config(task=task)
    assert config.task == task
    assert config.checkpoint.monitor == "val_acc" and config.checkpoint.mode == "max"


def test_spiral_default_is_the_tutorial_mlp() -> None:
    config = load_config()
    assert config.task == "spiral"
    assert config.model.hidden == [64, 32, 16]


def test_custom_default_needs_the_classes() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(task="custom")
    assert "custom.module is required for task custom" in str(e.value)


def test_file_overrides_and_shortcuts_layer_in_order(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text("task: mnist\ntrainer:\n  max_epochs: 3\n  batch_size: 32\ndata:\n  dir: /d\n")
    call = parse_call(["--config", str(f), "--set", "trainer.max_epochs=7",
                       "--set", "model.hidden=[8, 4]", "--max-epochs", "9", "--lr", "0.5",
                       "--scale-lr", "linear"])
    config = call.load()
    assert config.task == "mnist"
    assert config.trainer.max_epochs == 9  # shortcut after --set
    assert config.trainer.batch_size == 32  # from the file
    assert config.optim.lr == 0.5 and config.optim.scale_lr == "linear"
    assert config.model.hidden == [8, 4]
    assert config.data.dir == "/d"
    assert config.data.num_workers == 2  # from mnist's defaults


def test_every_bad_field_gets_one_line_with_its_source(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("trainer:\n  max_epochs: 0\n  batchsize: 4\noptim:\n  name: rmsprop\n")
    with pytest.raises(ConfigError) as e:
        load_config(f, overrides=["data.noise=-1"])
    lines = e.value.what.splitlines()[1:]
    assert len(lines) == 4
    text = "\n".join(lines)
    assert f"{f}: trainer.max_epochs: Input should be greater than 0 (got 0)" in text
    assert f"{f}: trainer.batchsize: unknown field" in text
    assert f"{f}: optim.name:" in text
    assert "--set: data.noise: Input should be greater than or equal to 0 (got -1)" in text


def test_unknown_top_level_key_from_set() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["trainr.max_epochs=3"])
    assert "--set: trainr: unknown field" in str(e.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("trainer:\n  max_epochs: [1, 2\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(f) in str(e.value) and "line" in str(e.value)


def test_task_flag_conflicting_with_file(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("task: mnist\n")
    with pytest.raises(ConfigError, match="--task spiral conflicts with 'task: mnist'"):
        load_config(f, task="spiral")


def test_file_must_exist() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/hpctrain.yaml")


@pytest.mark.parametrize("item", ["noequals", "=5", "a..b=1", "trainer max_epochs=1"])
def test_malformed_overrides(item: str) -> None:
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        parse_override(item)


def test_override_values_are_yaml() -> None:
    assert parse_override("a.b=[1, 2]") == ("a.b", [1, 2])
    assert parse_override("a=null") == ("a", None)
    assert parse_override("a=") == ("a", None)
    assert parse_override("a=x=y") == ("a", "x=y")


def test_set_into_a_value_is_an_error() -> None:
    with pytest.raises(ConfigError, match="trainer.max_epochs is a value, not a section"):
        load_config(overrides=["trainer.max_epochs.x=1"])


def test_custom_class_path_format() -> None:
    with pytest.raises(ConfigError, match="not of the form 'package.module:ClassName'"):
        load_config(
            task="custom", overrides=["custom.module=pkg.mod.Cls", "custom.datamodule=pkg:D"]
        )


def test_dump_round_trips() -> None:
    config = load_config(task="mnist", overrides=["data.dir=/x"])
    again = yaml.safe_load(dump_config(config))
    assert again == config.model_dump(mode="json")

"""`hpctrain train` through typer, `python -m hpctrain.trainer`, and the import boundaries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer
import yaml
from typer.testing import CliRunner

from hpctrain.cli.train import register as register_train
from hpctrain.errors import ConfigError
from tests.waits import wait_for

from .helpers import TINY_SPIRAL, clean_env, epochs_in, run_module


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Test root."""

    register_train(app)
    return app


def test_train_print_config_shows_the_resolved_config(tmp_path: Path) -> None:
    f = tmp_path / "my.yaml"
    f.write_text("task: fashionmnist\ndata:\n  dir: /ptmp/data\n")
    result = CliRunner().invoke(
        _app(), ["train", "--config", str(f), "--set", "trainer.max_epochs=3", "--print-config"]
    )
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.stdout)
    assert shown["task"] == "fashionmnist"
    assert shown["data"]["dir"] == "/ptmp/data"
    assert shown["trainer"]["max_epochs"] == 3


def test_train_config_errors_reach_the_boundary_as_config_errors() -> None:
    result = CliRunner().invoke(_app(), ["train", "--set", "trainer.max_epochs=zero"])
    assert isinstance(result.exception, ConfigError)
    assert "--set: trainer.max_epochs: Input should be a valid integer" in str(result.exception)


def test_train_command_trains(tmp_path: Path) -> None:
    args = ["train", "--task", "spiral", "--max-epochs", "2", "--run-dir", str(tmp_path / "r")]
    for item in TINY_SPIRAL:
        args += ["--set", item]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    assert epochs_in(result.stdout) == [1, 2]
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["epochs_completed"] == 2


def test_module_entry_point_errors_are_clear(tmp_path: Path) -> None:
    result = run_module(
        ["--task", "mnist", "--set", "data.dir=/nonexistent/mnist", "--run-dir", str(tmp_path)]
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: the mnist data directory /nonexistent/mnist")
    assert "hpctrain data fetch mnist --to /nonexistent/mnist" in result.stderr
    assert "Traceback" not in result.stderr


def test_module_help_documents_overrides() -> None:
    result = run_module(["--help"])
    assert result.returncode == 0
    assert "--set KEY=VALUE" in result.stdout and "trainer.max_epochs=5" in result.stdout


def test_cli_and_light_trainer_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import hpctrain.cli.train, hpctrain.cli.data, hpctrain.trainer, hpctrain.trainconfig\n"
        "import hpctrain.trainer.cluster, hpctrain.trainer.entry, hpctrain.tasks.registry\n"
        "import hpctrain.tasks.parts.datasets.fetch\n"
        "heavy = sorted(m for m in ('torch', 'lightning', 'numpy') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_trainer_never_imports_the_cli() -> None:
    code = (
        "import sys\n"
        "import hpctrain.trainer.runner, hpctrain.trainer.entry\n"
        "print('hpctrain.cli' in sys.modules, 'typer' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False False"
    trainer_src = Path(__file__).resolve().parents[2] / "hpctrain" / "trainer"
    for path in trainer_src.rglob("*.py"):
        assert "hpctrain.cli" not in path.read_text(), path


def test_hpctrain_train_stops_safely_on_sigterm_with_exit_75(tmp_path: Path) -> None:
    import signal

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpctrain", "train", "--task", "spiral", "--max-epochs", "100000",
         "--run-dir", str(run_dir), *[f"--set={s}" for s in TINY_SPIRAL]],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    wait_for(lambda: (run_dir / "last.ckpt").exists() or proc.poll() is not None, 300,
             "first checkpoint")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, out + err
    assert "Error: training stopped" in err and "Traceback" not in err
    assert (run_dir / "stop-saved").is_file()

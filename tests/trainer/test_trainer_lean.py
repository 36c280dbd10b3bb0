"""The trainer's import of Lightning leaves out torchmetrics' domains (and torchvision,
transformers, scipy.signal) unless the user's module uses them, which then get them as usual
(hpctrain/trainer/lean.py, issue 43)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.trainer import lean

from .helpers import clean_env, epoch_line_metrics

# torchvision, transformers and scipy beside torch and Lightning: scripts/realistic-venv.sh.
REALISTIC = Path(os.environ.get("HPCTRAIN_REALISTIC_PYTHON") or Path(
    os.environ.get("HPCTRAIN_CACHE_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hpctrain")
    / "venv-realistic" / "bin" / "python")
TORCHMETRICS_DOMAINS = ["torchmetrics.audio", "torchmetrics.functional",
                        "torchmetrics.functional.image", "torchmetrics.functional.text",
                        "torchmetrics.image", "torchmetrics.text"]


def train_custom(tmp_path: Path, module: str, python: str = sys.executable,
                 env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """One epoch of `module` (custom_pkg.<module>) under `python -m hpctrain.trainer`: the
    watched modules imported when training started, and the epoch line's metrics."""
    name = module.partition(":")[0].rpartition(".")[2]
    report = tmp_path / f"{name}.json"
    args = ["--task", "custom", "--max-epochs", "1", "--resume", "never",
            "--run-dir", str(tmp_path / name), "--set", f"custom.module=custom_pkg.{module}",
            "--set", "custom.datamodule=custom_pkg.blobs:BlobData",
            "--set", f"custom.module_kwargs={{report: '{report}'}}",
            "--set", "data.num_workers=0", "--set", "checkpoint.enabled=false"]
    done = subprocess.run([python, "-m", "hpctrain.trainer", *args],
                          env=env or clean_env({"OMP_NUM_THREADS": "1"}),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [metrics] = epoch_line_metrics(done.stdout)
    return json.loads(report.read_text()), metrics


@pytest.mark.slow
def test_the_trainer_imports_no_torchmetrics_domain(tmp_path: Path) -> None:
    imported, metrics = train_custom(tmp_path, "imports_probe:ReportingClassifier")
    assert imported == []
    assert float(metrics["val_acc"]) > 0.9


@pytest.mark.slow
def test_a_user_module_that_uses_a_domain_gets_it(tmp_path: Path) -> None:
    imported, metrics = train_custom(tmp_path, "uses_domain:SSIMClassifier")
    # The rest of torchmetrics' __init__ ran, as `import torchmetrics` runs it.
    assert set(TORCHMETRICS_DOMAINS) <= set(imported)
    assert metrics["val_ssim"] == "1.0000"


# A process's torchmetrics after Lightning's import and the user's first touch: its modules
# and the package's names. PROBE prints them as JSON.
PROBE = """
import json, sys
from hpctrain.trainer import lean
if sys.argv[1] != "plain":
    assert lean.install()
import lightning, torchmetrics
assert lean.deferred() == (sys.argv[1] != "plain")
if sys.argv[1] == "attribute":
    torchmetrics.Accuracy(task="binary")
elif sys.argv[1] == "submodule":
    from torchmetrics.functional.text import char_error_rate
assert not lean.deferred()
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("torchmetrics")),
                  "names": sorted(vars(torchmetrics)),
                  "loader": type(torchmetrics.__loader__).__name__,
                  "handlers": len(torchmetrics._logger.handlers)}))
"""


@pytest.mark.slow
def test_once_touched_torchmetrics_is_the_package_a_plain_import_makes() -> None:
    def probe(touch: str) -> dict[str, object]:
        out = subprocess.run([sys.executable, "-c", PROBE, touch], env=clean_env(),
                             capture_output=True, text=True, check=True, timeout=300).stdout
        result: dict[str, object] = json.loads(out)
        return result

    plain = probe("plain")
    assert set(TORCHMETRICS_DOMAINS) <= set(plain["modules"])  # type: ignore[arg-type]
    assert probe("attribute") == plain
    assert probe("submodule") == plain


def test_switched_off_it_installs_nothing() -> None:
    before = list(sys.meta_path)
    assert lean.install({"HPCTRAIN_LEAN_IMPORTS": "0"}) is False
    assert sys.meta_path == before


def test_an_init_of_another_shape_is_not_split() -> None:
    assert lean.split_init(ast.parse("import os\nVERSION = '9'\n")) is None
    no_collections = "from torchmetrics import functional\nfrom torchmetrics.metric import Metric\n"
    assert lean.split_init(ast.parse(no_collections)) is None


def test_an_init_of_another_shape_is_imported_as_usual(tmp_path: Path) -> None:
    """A torchmetrics the finder does not know: the ordinary import, its errors included."""
    package = tmp_path / "torchmetrics"
    package.mkdir()
    (package / "__init__.py").write_text("import os\nWHOLE = True\n")
    code = ("from hpctrain.trainer import lean\nassert lean.install()\nimport torchmetrics\n"
            "print(torchmetrics.WHOLE, '__getattr__' in vars(torchmetrics), lean.deferred())\n")
    env = clean_env({"PYTHONPATH": os.pathsep.join([str(tmp_path), clean_env()["PYTHONPATH"]])})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.split() == ["True", "False", "False"]
    # The known shape whose core fails: the ordinary import runs and raises the real error.
    (package / "__init__.py").write_text(
        "from torchmetrics.__about__ import *\nfrom torchmetrics import functional\n"
        "from torchmetrics.metric import Metric\nfrom torchmetrics.collections import C\n")
    (package / "__about__.py").write_text("__version__ = '1.0'\n")
    (package / "utilities.py").write_text("")
    (package / "functional.py").write_text("")
    (package / "metric.py").write_text("raise RuntimeError('a broken metric module')\n")
    failed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60)
    assert failed.returncode == 1
    assert "RuntimeError: a broken metric module" in failed.stderr


realistic = pytest.mark.skipif(
    not REALISTIC.exists(),
    reason=f"no realistic venv at {REALISTIC} (torchvision, transformers, scipy beside torch and "
           "Lightning): build it with `bash scripts/realistic-venv.sh`")


@realistic
@pytest.mark.slow
def test_with_torchvision_and_transformers_installed_both_ways(tmp_path: Path) -> None:
    heavy = {"torchvision", "transformers", "scipy.signal"}
    imported, _ = train_custom(tmp_path, "imports_probe:ReportingClassifier", str(REALISTIC))
    assert imported == []
    imported, metrics = train_custom(tmp_path, "uses_torchvision:BoxIoUClassifier",
                                     str(REALISTIC))
    assert "torchvision" in imported and "torchmetrics.functional" not in imported
    assert metrics["val_box_iou"] == "1.0000"
    imported, metrics = train_custom(tmp_path, "uses_domain:SSIMClassifier", str(REALISTIC))
    assert heavy <= set(imported)
    assert metrics["val_ssim"] == "1.0000"

"""Issue 17: data held on the device, several batches per training_step call, the direct step
path and the start-up figure: each gives exactly what the plain path gives."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets.idx import write_idx
from hpctrain.tasks.parts.datasets.images import ImageDataModule
from hpctrain.timeline import process_age
from hpctrain.trainconfig.load import load_config
from hpctrain.trainer.runner import batches_per_call, run_training
from hpctrain.trainer.startup import PROCESS_START, RUN_CALL

from .helpers import TINY_SPIRAL, epochs_in, run_module
from .test_trainer_stop import _signal, _stop_then_resume

STARTUP_LINE = re.compile(
    r"^startup: first training step (\S+) s after the process start \(imports (\S+) s\)$", re.M
)


def _idx_files(directory: Path, train: int = 100, val: int = 30) -> Path:
    rng = np.random.default_rng(1)
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", val)):
        images = rng.integers(0, 256, (n, 28, 28), np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8))
    return directory


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("world", [1, 2])
def test_resident_batches_are_the_loaders_batches(tmp_path: Path, world: int) -> None:
    dm = ImageDataModule(
        "mnist", _idx_files(tmp_path / "mnist"), 8, 0, seed=5, normalization=(0.1, 0.3),
        on_device=True, chunk=3,
    )
    dm.setup("fit")
    assert dm.resident and dm._train is not None and dm._train.images.dtype == torch.uint8
    for data, shuffle in ((dm._train, True), (dm._val, False)):
        assert data is not None
        for rank in range(world):
            loader = dm.loader(data, shuffle, rank, world, pin_memory=False)
            resident = dm.batches(data, shuffle, rank, world)
            assert len(resident) == -(-len(loader) // 3)
            for epoch in (0, 1):
                loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
                resident.sampler.set_epoch(epoch)  # type: ignore[union-attr]
                expected = list(loader)
                chunks = list(resident)
                got = [(x.split(8), y.split(8)) for x, y in chunks]
                got_pairs = [(x, y) for xs, ys in got for x, y in zip(xs, ys, strict=True)]
                assert len(got_pairs) == len(expected)
                for (gx, gy), (ex, ey) in zip(got_pairs, expected, strict=True):
                    assert gx.dtype == torch.float32 and torch.equal(gx, ex)
                    assert torch.equal(gy, ey)


def test_mnist_on_device_trains_exactly_as_through_the_loader(tmp_path: Path) -> None:
    data = _idx_files(tmp_path / "mnist", train=96, val=32)
    common = [f"data.dir={data}", "trainer.max_epochs=2", "trainer.batch_size=16",
              "data.num_workers=1", "checkpoint.enabled=true"]
    runs = {
        "loader": ["data.on_device=false"],
        "device": ["data.on_device=true"],
        "device-chunks": ["data.on_device=true", "trainer.batches_per_call=4"],
    }
    summaries = {}
    for name, extra in runs.items():
        config = load_config(task="mnist", overrides=[*common, *extra])
        summaries[name] = run_training(config, tmp_path / name, resume="never")
    for name in ("device", "device-chunks"):
        assert _same_weights(tmp_path / "loader" / "last.ckpt", tmp_path / name / "last.ckpt")
        assert summaries[name]["final_val_acc"] == summaries["loader"]["final_val_acc"]
        assert [e["samples"] for e in summaries[name]["epochs"]] == [96, 96]
    assert summaries["device-chunks"]["batch_size_per_device"] == 16


class _Watching(L.Callback):
    """Overrides the backward hook: Lightning's own manual_backward path must then run."""

    def __init__(self) -> None:
        self.calls = 0

    def on_before_backward(self, trainer: L.Trainer, *args: Any) -> None:
        self.calls += 1


def test_chunks_and_the_direct_step_train_the_same_model(tmp_path: Path) -> None:
    base = [*TINY_SPIRAL, "trainer.max_epochs=2"]
    one = run_training(load_config(overrides=[*base, "trainer.batches_per_call=1"]),
                       tmp_path / "one", resume="never")
    chunked = run_training(load_config(overrides=[*base, "trainer.batches_per_call=5"]),
                           tmp_path / "chunked", resume="never")
    watcher = _Watching()
    hooked = run_training(load_config(overrides=[*base, "trainer.batches_per_call=5"]),
                          tmp_path / "hooked", resume="never", callbacks=[watcher])
    # 3277 samples of 256: 13 batches per epoch, every one a step in all three runs.
    assert watcher.calls == 26
    for run in ("chunked", "hooked"):
        assert _same_weights(tmp_path / "one" / "last.ckpt", tmp_path / run / "last.ckpt")
    for summary in (chunked, hooked):
        # Validation runs chunks too: the same losses, summed in larger pieces.
        assert summary["final_val_loss"] == pytest.approx(one["final_val_loss"], rel=1e-5)
        assert summary["final_val_acc"] == one["final_val_acc"]
        assert summary["epochs"][-1]["samples"] == one["epochs"][-1]["samples"] == 3277
    assert torch.load(tmp_path / "chunked" / "last.ckpt", weights_only=False)["global_step"] == 26


def test_chunked_run_stops_mid_epoch_and_resumes_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 13 batches per epoch in chunks of 2: 7 calls; a stop check after every call.
    overrides = [*TINY_SPIRAL, "trainer.max_epochs=3", "trainer.batches_per_call=2",
                 "trainer.stop_check_every_n_steps=1"]
    run = tmp_path / "run"
    end, summary, out = _stop_then_resume(run, _signal("SIGUSR1"), capsys, overrides, batch=2)
    assert end["epoch"] == 2 and end["mid_epoch"] and end["batches_done_in_epoch"] == 3
    assert end["global_step"] == 13 + 6
    assert epochs_in(out) == [2, 3]
    assert [e["samples"] for e in summary["epochs"]] == [3277] * 3
    run_training(load_config(overrides=overrides), tmp_path / "straight")
    assert _same_weights(run / "last.ckpt", tmp_path / "straight" / "last.ckpt")


def test_startup_is_reported_from_process_start(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_module(["--task", "spiral", "--max-epochs", "1", "--run-dir", str(run),
                         *[f"--set={o}" for o in TINY_SPIRAL]])
    assert result.returncode == 0, result.stderr
    match = STARTUP_LINE.search(result.stdout)
    assert match, result.stdout
    total, imports = float(match.group(1)), float(match.group(2))
    assert 0 < imports <= total
    # Printed once, after the banner and before the first epoch line.
    assert result.stdout.index("startup:") < result.stdout.index("epoch 1/1")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["startup_from"] == PROCESS_START
    assert f"{metrics['startup_s']:.2f}" == match.group(1)
    assert f"{metrics['startup_imports_s']:.2f}" == match.group(2)


def test_a_second_run_in_one_process_measures_from_its_call(train: Any, tmp_path: Path) -> None:
    train(tmp_path / "a", "trainer.max_epochs=1")
    out, summary = train(tmp_path / "b", "trainer.max_epochs=1")
    assert summary["startup_from"] == RUN_CALL and summary["startup_imports_s"] is None
    assert 0 < summary["startup_s"] < 60
    assert f"startup: first training step {summary['startup_s']:.2f} s after the {RUN_CALL}" in out


def test_process_age_reads_the_kernels_start_time() -> None:
    age = process_age()
    # This test process started before the test ran, and not a year ago.
    assert age is not None and 0 < age < 86400


@pytest.mark.parametrize(
    ("overrides", "task", "message"),
    [
        (["trainer.batches_per_call=2", "custom.module=x.y:Z"], "custom",
         "trainer.batches_per_call applies to the built-in tasks only"),
        (["trainer.batches_per_call=0"], "spiral", "trainer.batches_per_call"),
        (["trainer.batches_per_call=many"], "spiral", "trainer.batches_per_call"),
        (["data.on_device=sometimes"], "mnist", "data.on_device"),
        (["trainer.cuda_graphs=true", "custom.module=x.y:Z"], "custom",
         "trainer.cuda_graphs applies to the built-in tasks only"),
        (["trainer.cuda_graphs=sometimes"], "spiral", "trainer.cuda_graphs"),
    ],
)
def test_new_options_are_validated(overrides: list[str], task: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(task=task, overrides=overrides)
    assert message in str(e.value)


def test_custom_data_module_serves_its_tensors_from_the_device(
    train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    common = ["custom.module=custom_pkg.blobs:BlobClassifier",
              "custom.datamodule=custom_pkg.resident:ResidentBlobData",
              "trainer.max_epochs=2", "trainer.batch_size=24"]
    summaries = {}
    for resident in (True, False):
        run = tmp_path / str(resident)
        _, summaries[resident] = train(
            run, *common, f"custom.datamodule_kwargs={{resident: {str(resident).lower()}}}",
            task="custom",
        )
    assert _same_weights(tmp_path / "True" / "last.ckpt", tmp_path / "False" / "last.ckpt")
    assert summaries[True]["final_val_loss"] == pytest.approx(summaries[False]["final_val_loss"])
    assert [e["samples"] for e in summaries[True]["epochs"]] == [256, 256]
    assert summaries[True]["batch_size_per_device"] == 24


def test_direct_step_under_bf16_autocast_matches_lightnings_path(tmp_path: Path) -> None:
    # bf16-mixed has no gradient scaler, so the direct path applies; a hook brings Lightning's.
    config = load_config(overrides=[*TINY_SPIRAL, "trainer.max_epochs=1",
                                    "trainer.precision=bf16-mixed"])
    run_training(config, tmp_path / "direct", resume="never")
    watcher = _Watching()
    run_training(config, tmp_path / "hooked", resume="never", callbacks=[watcher])
    assert watcher.calls == 13
    assert _same_weights(tmp_path / "direct" / "last.ckpt", tmp_path / "hooked" / "last.ckpt")


def test_cuda_graphs_on_a_cpu_auto_says_off_and_true_stops(train: Any, tmp_path: Path) -> None:
    _, summary = train(tmp_path / "auto", "trainer.max_epochs=1")
    assert summary["cuda_graphs"] == "off: not on a GPU"
    with pytest.raises(ConfigError, match="trainer.cuda_graphs=true, but this run cannot use "
                       "them: not on a GPU"):
        train(tmp_path / "true", "trainer.max_epochs=1", "trainer.cuda_graphs=true")


def test_batches_per_call_auto_fills_a_call_on_a_gpu() -> None:
    spiral = load_config(task="spiral")
    # On a CPU, 32768 samples' worth per call: 4 of the default 8192.
    assert batches_per_call(spiral, "cpu") == 4 and batches_per_call(spiral, "gpu") == 64
    small = load_config(task="spiral", overrides=["trainer.batch_size=32"])
    assert batches_per_call(small, "cpu") == batches_per_call(small, "gpu") == 64

"""Trainer overhead: samples/s of hpctrain's trainer against a plain PyTorch loop, side by side.

Both train the same model on the same data with the same batch size, optimizer and device, in
one process, alternating (trainer, plain, plain, trainer, ...) over a few repeats. The trainer
runs its real code path (`run_training` with the task's shipped config) and its figure is the
per-epoch train throughput it records in metrics.json; the plain loop is timed the same way
(the train phase of each epoch). The first epoch of every run is warm-up and is left out;
a run's throughput is its total samples / total time over the remaining epochs, and the
reported ratio is the median over repeats of trainer / plain within each back-to-back pair.

    python benchmarks/trainer_overhead.py --device cpu --task spiral
    python benchmarks/trainer_overhead.py --task mnist --repeats 3 --json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DistributedSampler

from hpctrain.trainer.config import TrainConfig, load_config
from hpctrain.trainer.datasets.fetch import locate_idx_files
from hpctrain.trainer.datasets.idx import write_idx
from hpctrain.trainer.datasets.images import NORMALIZATION, ImageTensors, load_split
from hpctrain.trainer.datasets.spiral import TensorBatches, make_spiral
from hpctrain.trainer.models import TutorialCNN, build_optimizer, spiral_mlp
from hpctrain.trainer.runner import run_training

Batches = Callable[[int], Iterable[tuple[torch.Tensor, torch.Tensor]]]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def write_random_mnist(directory: Path, train: int, val: int, seed: int) -> None:
    """Random MNIST-shaped IDX files (uint8 28x28 images, labels 0-9)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", val)):
        images = rng.integers(0, 256, (n, 28, 28), np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8))


def plain_setup(
    config: TrainConfig, device: torch.device
) -> tuple[nn.Module, torch.optim.Optimizer, Batches]:
    """The model, optimizer and per-epoch batches the trainer would build, without Lightning."""
    torch.manual_seed(config.seed)
    bs = config.trainer.batch_size
    if config.task == "spiral":
        model: nn.Module = spiral_mlp(config.model.hidden)
        d = config.data
        x, y = make_spiral(d.samples, d.noise, d.turns, config.seed)
        n_val = max(1, round(len(x) * d.val_fraction))
        x, y = x[n_val:].to(device), y[n_val:].to(device)
        epoch = {"n": 0}
        batches = TensorBatches(
            x, y, bs, shuffle=True, seed=config.seed, epoch_fn=lambda: epoch["n"]
        )

        def spiral_epoch(n: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
            epoch["n"] = n
            return batches

        get_batches: Batches = spiral_epoch
    else:
        from hpctrain.trainer.datasets.images import ImageDataModule

        model = TutorialCNN()
        assert config.data.dir is not None
        files = locate_idx_files(config.task, Path(config.data.dir))
        mean, std = NORMALIZATION[config.task]
        data = ImageTensors(*load_split(files, "train", config.task), mean, std)
        dm = ImageDataModule(
            config.task, Path(config.data.dir), bs, config.data.num_workers, config.seed
        )
        loader = dm.loader(data, True, 0, 1, pin_memory=device.type == "cuda")

        def image_epoch(n: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
            sampler = loader.sampler
            assert isinstance(sampler, DistributedSampler)
            sampler.set_epoch(n)
            return loader

        get_batches = image_epoch
    model.to(device).train()
    return model, build_optimizer(model.parameters(), config.optim, config.optim.lr), get_batches


def plain_run(config: TrainConfig, device: torch.device) -> list[tuple[int, float]]:
    """Per-epoch (samples, seconds) of a hand-written loop doing what the trainer's step does."""
    model, optimizer, get_batches = plain_setup(config, device)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    epochs = []
    for epoch in range(config.trainer.max_epochs):
        total = torch.zeros((), device=device)
        samples = 0
        _sync(device)
        start = time.perf_counter()
        for x, y in get_batches(epoch):
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            n = y.shape[0]
            optimizer.zero_grad()
            loss_sum = loss_fn(model(x), y)
            (loss_sum / max(n, 1)).backward()
            optimizer.step()
            total.add_(loss_sum.detach())
            samples += n
        _sync(device)
        epochs.append((samples, time.perf_counter() - start))
        float(total)
    return epochs


def trainer_run(config: TrainConfig, run_dir: Path) -> list[tuple[int, float]]:
    """Per-epoch (samples, train seconds) of the real trainer, read from its metrics.json."""
    with contextlib.redirect_stdout(io.StringIO()):
        run_training(config, run_dir=run_dir, resume="never")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return [(int(e["samples"]), float(e["train_time_s"])) for e in metrics["epochs"]]


def throughput(epochs: list[tuple[int, float]]) -> float:
    """Samples per second over all epochs: total samples / total time."""
    return sum(n for n, _ in epochs) / sum(t for _, t in epochs)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print a table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--task", choices=("spiral", "mnist"), default="spiral")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=5, help="per run; the first is warm-up")
    p.add_argument("--batch-size", type=int, help="default: the task's shipped config")
    p.add_argument("--samples", type=int, help="spiral points / mnist training images")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda, but no CUDA GPU is visible")
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("lightning").setLevel(logging.WARNING)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")

    with tempfile.TemporaryDirectory(prefix="hpctrain-bench-") as tmp:
        overrides = [
            f"trainer.max_epochs={args.epochs}",
            f"trainer.accelerator={'gpu' if args.device == 'cuda' else 'cpu'}",
            "logging.progress=lines",
        ]
        if args.batch_size:
            overrides.append(f"trainer.batch_size={args.batch_size}")
        if args.task == "mnist":
            data_dir = Path(tmp) / "mnist"
            write_random_mnist(data_dir, args.samples or 4096, 512, seed=0)
            overrides.append(f"data.dir={data_dir}")
        elif args.samples:
            overrides.append(f"data.samples={args.samples}")
        config = load_config(task=args.task, overrides=overrides)
        device = torch.device("cuda" if args.device == "cuda" else "cpu")

        # Untimed warm-up of both sides: lazy imports, allocator and thread pools.
        warm = config.model_copy(
            update={"trainer": config.trainer.model_copy(update={"max_epochs": 2})}
        )
        trainer_run(warm, Path(tmp) / "warm-up")
        plain_run(warm, device)
        runs: dict[str, list[list[tuple[int, float]]]] = {"trainer": [], "plain": []}
        for i in range(args.repeats):
            # Alternate the order so that neither side always runs on a warmer machine.
            for side in ("trainer", "plain") if i % 2 == 0 else ("plain", "trainer"):
                if side == "trainer":
                    epochs = trainer_run(config, Path(tmp) / f"run-{i}")
                else:
                    epochs = plain_run(config, device)
                runs[side].append(epochs[1:] if len(epochs) > 1 else epochs)

    trainer_rates = [throughput(r) for r in runs["trainer"]]
    plain_rates = [throughput(r) for r in runs["plain"]]
    # Each repeat runs both sides back to back, so its ratio cancels slow drifts of a shared
    # machine; the median over repeats drops the odd disturbed pair.
    ratios = [t / p for t, p in zip(trainer_rates, plain_rates, strict=True)]
    result: dict[str, Any] = {
        "task": args.task,
        "device": args.device,
        "batch_size": config.trainer.batch_size,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "trainer_samples_per_s": statistics.median(trainer_rates),
        "plain_samples_per_s": statistics.median(plain_rates),
        "ratio": statistics.median(ratios),
        "repeat_ratios": ratios,
        "trainer_runs": trainer_rates,
        "plain_runs": plain_rates,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"trainer overhead: task {args.task}, device {args.device}, batch {result['batch_size']}, "
        f"{args.epochs} epochs x {args.repeats} repeats, {result['torch_threads']} torch thread(s)"
    )
    print(f"{'':<12}{'median':>12}   per repeat")
    rows = (
        ("trainer", result["trainer_samples_per_s"], trainer_rates, ",.0f"),
        ("plain loop", result["plain_samples_per_s"], plain_rates, ",.0f"),
        ("ratio", result["ratio"], ratios, ".3f"),
    )
    for name, median, values, fmt in rows:
        print(f"{name:<12}{median:>12{fmt}}   {', '.join(format(v, fmt) for v in values)}")
    print("samples/s of the train phase; ratio = trainer / plain, target >= 0.9 on the CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())

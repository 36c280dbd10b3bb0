"""mnist: the CNN of the tutorials (conv 32, conv 64, max-pool, dropout, fc 128, fc 10) on the
MNIST IDX files.

Compute nodes have no internet: fetch the files on a login node with
`hpctrain data fetch mnist --to DIR` and set data.dir to DIR. fashionmnist is the same task on
other files, built by `build_on_idx_files` below.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.tasks.registry import DataFiles, classifier_task

if TYPE_CHECKING:
    from hpctrain.tasks.registry import Built
    from hpctrain.trainsettings.sections import TrainSettings

# The mean and standard deviation of MNIST's training pixels (in [0, 1]).
NORMALIZATION = (0.1307, 0.3081)

SETTINGS = {
    "seed": 42,
    "data": {"dir": None, "num_workers": 2},
    "optim": {"name": "adam", "lr": 0.001},
    "trainer": {"max_epochs": 5, "batch_size": 64},
}


def batches_per_call(batch_size: int, device: str) -> int:
    """The CNN's step on a CPU is long enough by itself, and a long call would delay the safe
    stop, which is checked between calls; on a GPU with the data there, 2048 samples' worth."""
    return max(1, min(64, (2048 if device == "gpu" else 0) // batch_size))


def build_on_idx_files(
    normalization: tuple[float, float],
) -> Callable[[TrainSettings, float, int], Built]:
    """The build of a task on MNIST-style IDX files with these training pixels' mean and std."""

    def build(config: TrainSettings, lr: float, chunk: int) -> Built:
        """The tutorial CNN in hpctrain's Classifier, and the IDX files of data.dir."""
        from hpctrain.tasks.parts.classifier import classifier_for
        from hpctrain.tasks.parts.datasets.fetch import default_data_dir, locate_idx_files
        from hpctrain.tasks.parts.datasets.images import ImageDataModule
        from hpctrain.tasks.parts.networks import TutorialCNN

        d = config.data
        where = Path(d.dir).expanduser() if d.dir else default_data_dir(config.task)
        directory = where.absolute()
        # Fail before Lightning starts anything, with the fetch command in the message.
        locate_idx_files(config.task, directory)
        data = ImageDataModule(
            config.task, directory, config.trainer.batch_size, d.num_workers, config.seed,
            normalization, on_device=d.on_device, chunk=chunk,
        )
        return classifier_for(TutorialCNN(), config, lr), data

    return build


TASK = classifier_task(
    name="mnist",
    summary="handwritten digits (MNIST IDX files, `hpctrain data fetch mnist`), the tutorial CNN",
    settings=SETTINGS,
    build=build_on_idx_files(NORMALIZATION),
    batches_per_call=batches_per_call,
    # The checksums of the official files, as published with torchvision's datasets.
    data_files=DataFiles(
        base_url="https://ossci-datasets.s3.amazonaws.com/mnist/",
        files={
            "train-images-idx3-ubyte.gz": "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "md5:d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "md5:9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "md5:ec29112dd5afa0611ce80d1b7f02629c",
        },
    ),
)

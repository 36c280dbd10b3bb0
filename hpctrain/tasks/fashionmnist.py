"""fashionmnist: the mnist task (the tutorials' CNN) on the FashionMNIST IDX files.

Compute nodes have no internet: fetch the files on a login node with
`hpctrain data fetch fashionmnist --to DIR` and set data.dir to DIR.
"""

from __future__ import annotations

from hpctrain.tasks import mnist
from hpctrain.tasks.registry import DataFiles, classifier_task

# The mean and standard deviation of FashionMNIST's training pixels (in [0, 1]).
NORMALIZATION = (0.2860, 0.3530)

TASK = classifier_task(
    name="fashionmnist",
    summary="clothing images (FashionMNIST IDX files, `hpctrain data fetch fashionmnist`), "
    "the tutorial CNN",
    settings=mnist.SETTINGS,
    build=mnist.build_on_idx_files(NORMALIZATION),
    batches_per_call=mnist.batches_per_call,
    # The checksums of the official files, as published with torchvision's datasets.
    data_files=DataFiles(
        base_url="https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        files={
            "train-images-idx3-ubyte.gz": "md5:8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "md5:25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "md5:bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "md5:bb300cfdad3c16e7a12a480ee83cd310",
        },
    ),
)

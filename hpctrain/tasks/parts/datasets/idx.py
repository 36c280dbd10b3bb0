"""Read and write the IDX format of MNIST-style datasets, gzipped or not, without torchvision."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from hpctrain.errors import ConfigError

# The third byte of an IDX file's magic number names the element type.
_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}


def read_idx(path: Path) -> np.ndarray:
    """Parse one IDX file into an array of its declared type and shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ConfigError(f"cannot read {path}: {e}", "fetch the dataset again") from e
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ConfigError(f"{path} is not an IDX file (bad magic number)", "fetch it again")
    dtype, ndim = _DTYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ConfigError(f"{path} is truncated (incomplete header)", "fetch it again")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ConfigError(
            f"{path} holds {len(data) - header} data bytes, its header promises {expected}",
            "the file is truncated or corrupt; fetch it again",
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write an array as IDX (gzipped when the name ends in .gz); used for tests and benchmarks."""
    big_endian = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    code = _CODES.get(np.dtype(big_endian))
    if code is None:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    payload = (
        bytes([0, 0, code, array.ndim])
        + struct.pack(f">{array.ndim}I", *array.shape)
        + np.ascontiguousarray(array, dtype=big_endian).tobytes()
    )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(payload)

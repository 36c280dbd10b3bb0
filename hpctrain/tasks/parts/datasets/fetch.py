"""Download MNIST-style datasets on a login node: checksummed, atomic, with no torch import.

Compute nodes have no internet, so `hpctrain data fetch <dataset> --to DIR` runs on a login node
and the trainer later reads DIR. The base URL is `--base-url`, else `$HPCTRAIN_DATA_URL` (where
`{dataset}` is replaced by the dataset name, so one mirror can serve both), else the official one.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hpctrain.errors import ConfigError
from hpctrain.tasks import registry
from hpctrain.tasks.registry import DataFiles

ENV_BASE_URL = "HPCTRAIN_DATA_URL"
_CHUNK = 1 << 20


# The files of every task that reads some (its declaration's data_files), by task name.
DATASETS: dict[str, DataFiles] = {
    name: task.data_files for name, task in registry.all_tasks().items() if task.data_files
}

# The four files every MNIST-style dataset directory needs (each may also be gzipped).
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "val_images": "t10k-images-idx3-ubyte",
    "val_labels": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True)
class FetchedFile:
    """One file of a fetch: where it is and whether it was downloaded or already there."""

    path: Path
    status: str
    url: str


def _spec(dataset: str) -> DataFiles:
    try:
        return DATASETS[dataset]
    except KeyError:
        raise ConfigError(
            f"unknown dataset {dataset!r}", f"choose one of {', '.join(sorted(DATASETS))}"
        ) from None


def default_data_dir(dataset: str, env: Mapping[str, str] | None = None) -> Path:
    """Where a dataset lives by default: $HPCTRAIN_DATA_DIR/<dataset>, else ./data/<dataset>."""
    env = os.environ if env is None else env
    root = env.get("HPCTRAIN_DATA_DIR")
    return (Path(root).expanduser() if root else Path.cwd() / "data") / dataset


def fetch_command(dataset: str, directory: Path) -> str:
    """The command that downloads `dataset` into `directory`, quoted for a shell."""
    return f"hpctrain data fetch {dataset} --to {shlex.quote(str(directory))}"


def base_url_for(
    dataset: str, base_url: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """--base-url, else $HPCTRAIN_DATA_URL, else the official location; ends with '/'."""
    env = os.environ if env is None else env
    url = base_url or env.get(ENV_BASE_URL) or _spec(dataset).base_url
    url = url.replace("{dataset}", dataset)
    return url if url.endswith("/") else url + "/"


def _digest(expected: str) -> tuple[str, str]:
    algorithm, _, value = expected.partition(":")
    if algorithm not in ("md5", "sha256") or not value:
        raise ValueError(f"checksum {expected!r} is not 'md5:<hex>' or 'sha256:<hex>'")
    return algorithm, value.lower()


def file_checksum_ok(path: Path, expected: str) -> bool:
    """Whether the file at `path` has the checksum `expected`."""
    algorithm, value = _digest(expected)
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == value


def _download(url: str, target: Path, expected: str, timeout: float) -> None:
    algorithm, value = _digest(expected)
    digest = hashlib.new(algorithm)
    # The temporary file sits next to the target so that os.replace is an atomic rename.
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        # mkstemp makes owner-only files; a fetched dataset should follow the umask.
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        digest.update(chunk)
                        out.write(chunk)
            except urllib.error.HTTPError as e:
                raise ConfigError(
                    f"download of {url} failed: HTTP {e.code} {e.reason}",
                    f"check --base-url / ${ENV_BASE_URL}",
                ) from e
            except (urllib.error.URLError, OSError) as e:
                reason = getattr(e, "reason", e)
                raise ConfigError(
                    f"cannot download {url}: {reason}",
                    "run the fetch on a login node with internet access, or point --base-url "
                    "at a reachable mirror",
                ) from e
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != value:
            raise ConfigError(
                f"checksum mismatch for {url}: expected {algorithm} {value}, "
                f"got {digest.hexdigest()}",
                f"the mirror serves different files; check --base-url / ${ENV_BASE_URL}",
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_dataset(
    dataset: str,
    dest: Path,
    base_url: str | None = None,
    files: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: Callable[[FetchedFile], None] | None = None,
) -> list[FetchedFile]:
    """Download the files of `dataset` into `dest`, verifying each checksum before it lands."""
    url = base_url_for(dataset, base_url)
    wanted = files if files is not None else _spec(dataset).files
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create {dest}: {e.strerror}", "choose a writable --to") from e
    fetched = []
    for name, expected in wanted.items():
        target = dest / name
        file_url = url + name
        if target.is_file() and file_checksum_ok(target, expected):
            result = FetchedFile(target, "present", file_url)
        else:
            _download(file_url, target, expected, timeout)
            result = FetchedFile(target, "downloaded", file_url)
        fetched.append(result)
        if progress is not None:
            progress(result)
    return fetched


def locate_idx_files(dataset: str, directory: Path) -> dict[str, Path]:
    """The four IDX files of a dataset directory, or a ConfigError saying how to fetch them."""
    command = fetch_command(dataset, directory)
    hint = f"compute nodes have no internet: on a login node run `{command}`"
    if not directory.is_dir():
        raise ConfigError(f"the {dataset} data directory {directory} does not exist", hint)
    found: dict[str, Path] = {}
    missing = []
    for role, name in IDX_FILES.items():
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                found[role] = candidate
                break
        else:
            missing.append(f"{name}[.gz]")
    if missing:
        raise ConfigError(f"{directory} lacks {', '.join(missing)} for {dataset}", hint)
    return found

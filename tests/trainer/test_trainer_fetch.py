"""Dataset files: IDX parsing, and fetching from a loopback HTTP server with checksums."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from hpctrain.cli.data import register as register_data
from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets import fetch
from hpctrain.tasks.parts.datasets.fetch import (
    DATASETS,
    fetch_dataset,
    locate_idx_files,
)
from hpctrain.tasks.parts.datasets.idx import read_idx, write_idx
from hpctrain.tasks.registry import DataFiles

NAMES = list(DATASETS["mnist"].files)


def write_mnist_like(directory: Path, train: int = 32, val: int = 8, gz: bool = True) -> None:
    """Tiny random MNIST-shaped IDX files, named as the official ones."""
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    for prefix, n in (("train", train), ("t10k", val)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels)


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving a directory of generated dataset files."""
    root = tmp_path / "www"
    write_mnist_like(root / "mnist")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_QuietHandler, directory=str(root))
    )
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_idx_round_trip(tmp_path: Path) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    for name in ("a-idx3-ubyte", "a-idx3-ubyte.gz"):
        write_idx(tmp_path / name, array)
        assert np.array_equal(read_idx(tmp_path / name), array)
    floats = np.linspace(0, 1, 5, dtype=np.float32)
    write_idx(tmp_path / "f", floats)
    assert np.array_equal(read_idx(tmp_path / "f"), floats)


def test_idx_truncated_or_foreign_files(tmp_path: Path) -> None:
    write_idx(tmp_path / "x", np.zeros((4, 28, 28), dtype=np.uint8))
    data = (tmp_path / "x").read_bytes()
    (tmp_path / "short").write_bytes(data[:-10])
    with pytest.raises(ConfigError, match="truncated or corrupt"):
        read_idx(tmp_path / "short")
    (tmp_path / "html").write_bytes(b"<html>not found</html>")
    with pytest.raises(ConfigError, match="not an IDX file"):
        read_idx(tmp_path / "html")
    (tmp_path / "bad.gz").write_bytes(gzip.compress(data)[:20])
    with pytest.raises(ConfigError, match="cannot read"):
        read_idx(tmp_path / "bad.gz")


def test_fetch_downloads_verifies_and_skips_present_files(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = served
    files = {name: sha256(root / "mnist" / name) for name in NAMES}
    dest = tmp_path / "data" / "mnist"
    first = fetch_dataset("mnist", dest, base_url=f"{url}/mnist", files=files, timeout=10)
    assert [f.status for f in first] == ["downloaded"] * 4
    assert leftovers(dest) == sorted(NAMES)
    for name in NAMES:
        assert (dest / name).read_bytes() == (root / "mnist" / name).read_bytes()
    again = fetch_dataset("mnist", dest, base_url=f"{url}/mnist", files=files, timeout=10)
    assert [f.status for f in again] == ["present"] * 4
    assert set(locate_idx_files("mnist", dest)) == {
        "train_images",
        "train_labels",
        "val_images",
        "val_labels",
    }


def test_checksum_mismatch_fails_cleanly(served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    dest = tmp_path / "mnist"
    # The generated files cannot match the official MNIST checksums.
    with pytest.raises(ConfigError) as e:
        fetch_dataset("mnist", dest, base_url=f"{url}/mnist", timeout=10)
    assert "checksum mismatch" in str(e.value) and "train-images-idx3-ubyte.gz" in str(e.value)
    assert leftovers(dest) == []


def test_a_corrupt_local_file_is_replaced(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    files = {name: sha256(root / "mnist" / name) for name in NAMES}
    dest = tmp_path / "mnist"
    dest.mkdir()
    (dest / NAMES[0]).write_bytes(b"half a file")
    result = fetch_dataset("mnist", dest, base_url=f"{url}/mnist", files=files, timeout=10)
    assert result[0].status == "downloaded"
    assert (dest / NAMES[0]).read_bytes() == (root / "mnist" / NAMES[0]).read_bytes()


def test_missing_file_on_server(served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    with pytest.raises(ConfigError, match="HTTP 404"):
        fetch_dataset("mnist", tmp_path / "m", base_url=f"{url}/nowhere", timeout=10)
    assert leftovers(tmp_path / "m") == []


def test_base_url_from_environment_with_dataset_placeholder(
    served: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = served
    monkeypatch.setenv("HPCTRAIN_DATA_URL", f"{url}/{{dataset}}")
    files = {name: sha256(root / "mnist" / name) for name in NAMES}
    result = fetch_dataset("mnist", tmp_path / "m", files=files, timeout=10)
    assert result[0].url == f"{url}/mnist/{NAMES[0]}"


def test_unknown_dataset() -> None:
    with pytest.raises(ConfigError, match="unknown dataset 'cifar'"):
        fetch.base_url_for("cifar")


def test_missing_data_dir_names_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        locate_idx_files("fashionmnist", tmp_path / "nope")
    assert f"hpctrain data fetch fashionmnist --to {tmp_path / 'nope'}" in str(e.value)
    (tmp_path / "partial").mkdir()
    write_mnist_like(tmp_path / "partial", gz=False)
    (tmp_path / "partial" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ConfigError) as e:
        locate_idx_files("mnist", tmp_path / "partial")
    assert "lacks t10k-labels-idx1-ubyte[.gz]" in str(e.value)
    assert "hpctrain data fetch mnist" in str(e.value)


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Test root."""

    register_data(app)
    return app


def test_cli_fetch_with_checksum_mismatch(served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    dest = tmp_path / "fm"
    result = CliRunner().invoke(
        _app(), ["data", "fetch", "mnist", "--to", str(dest), "--base-url", f"{url}/mnist"]
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert "checksum mismatch" in str(result.exception)
    assert leftovers(dest) == []


def test_cli_fetch_json(
    served: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = served
    files = {name: sha256(root / "mnist" / name) for name in NAMES}
    monkeypatch.setitem(fetch.DATASETS, "mnist", DataFiles(base_url=f"{url}/mnist/", files=files))
    dest = tmp_path / "m"
    result = CliRunner().invoke(_app(), ["data", "fetch", "mnist", "--to", str(dest), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["directory"] == str(dest)
    assert [f["status"] for f in report["files"]] == ["downloaded"] * 4

"""`hpctrain data fetch` through the installed console script, against loopback servers.

No network here: the server serves generated files, which the official checksums refuse,
so this run checks the real entry point's download, verification and error path; the
successful download with matching checksums is tests/trainer/test_trainer_fetch.py's.
"""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.trainer.test_trainer_fetch import write_mnist_like

SCRIPT = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "hpctrain"


class _Recording(http.server.SimpleHTTPRequestHandler):
    requested: list[str]

    def log_message(self, format: str, *args: object) -> None:
        self.requested.append(self.path)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP mirror of generated MNIST-like files: (its URL, the paths asked)."""
    root = tmp_path / "www"
    write_mnist_like(root / "mnist")
    requested: list[str] = []
    handler = type("Handler", (_Recording,), {"requested": requested})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _fetch(tmp_path: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), "run scripts/setup.sh: the console script is missing"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout_s,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, check=False)


def test_fetch_asks_the_base_url_and_refuses_a_foreign_file(
    mirror: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, requested = mirror
    dest = tmp_path / "data" / "mnist"
    res = _fetch(tmp_path, "data", "fetch", "mnist", "--to", str(dest), "--base-url",
                 f"{url}/mnist", "--timeout", "30")
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.startswith("Error: checksum mismatch for "
                                 f"{url}/mnist/train-images-idx3-ubyte.gz"), res.stderr
    assert "Traceback" not in res.stderr
    assert requested == ["/mnist/train-images-idx3-ubyte.gz"]
    assert sorted(p.name for p in dest.iterdir()) == []  # nothing half-written lands


def test_timeout_bounds_a_server_that_never_answers(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        res = _fetch(tmp_path, "data", "fetch", "mnist", "--to", str(tmp_path / "m"),
                     "--base-url", f"http://127.0.0.1:{port}/", "--timeout", "1",
                     # Half the default of 60 s, thirty times the 1 s asked: an ignored
                     # --timeout fails here, a loaded machine does not.
                     timeout_s=30)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.startswith("Error: "), res.stderr
    assert "timed out" in res.stderr and "Traceback" not in res.stderr, res.stderr

"""A dev job in a container (`hpctrain dev --container`, docs/dev.md, "In a container"): the
files its script leaves beside the shell's environment, and `dev-run`'s way out of the
container.

The job's script works out the runtime's words once, as for a batch rank, and saves them
NUL-separated (templates/sbatch.sh.j2); the shell's step reads them on the node and starts the
shell inside (slurm/interactive.py). In the container there is no srun, so `dev-run` hands its
script to the job's script, outside, through a FIFO: its directory holds the script and the
request (where to run it, and the shell's changes to the job's environment), and gets back the
script's output and exit status.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hpctrain.errors import HpctrainError
from hpctrain.files.atomic import write_atomic
from hpctrain.values import rundir as rd


@dataclass(frozen=True)
class ContainerFiles:
    """What a dev job in a container keeps beside its shell's environment (`dev_env`); the
    template and the shell's step name them by the same suffixes."""

    dev_env: Path

    def _beside(self, name: str) -> Path:
        return self.dev_env.with_name(name)

    @property
    def words(self) -> Path:
        """The runtime's words before a command (ch-run ... IMAGE --), NUL-separated."""
        return self._beside(rd.DEV_CONTAINER_WORDS)

    @property
    def srun_options(self) -> Path:
        """srun's own options for the container (pyxis's), NUL-separated; empty otherwise."""
        return self._beside(rd.DEV_CONTAINER_SRUN)

    @property
    def inside(self) -> Path:
        """The job's environment as the runtime passed it in: what the shell starts with."""
        return self._beside(rd.DEV_INSIDE)

    @property
    def inside_env(self) -> Path:
        """The same, NUL-separated NAME=VALUE: what a dev-run tells its shell's changes from."""
        return self._beside(rd.DEV_INSIDE_ENV)

    @property
    def relay(self) -> Path:
        """The FIFO through which a dev-run asks the job's script to run its script."""
        return self._beside(rd.DEV_RELAY)


@dataclass(frozen=True)
class RelayFiles:
    """One relayed dev-run's files, in its own directory (beside its script)."""

    root: Path

    @property
    def request(self) -> Path:
        return self.root / rd.RELAY_REQUEST

    @property
    def output(self) -> Path:
        return self.root / rd.RELAY_OUTPUT

    @property
    def stop(self) -> Path:
        return self.root / rd.RELAY_STOP

    @property
    def rc(self) -> Path:
        return self.root / rd.RELAY_RC


def nul_words(data: bytes) -> tuple[str, ...]:
    """Words saved NUL-separated (each one ended by a NUL), whole."""
    return tuple(w.decode("utf-8", "surrogateescape") for w in data.split(b"\0")[:-1])


def environ_words(data: bytes) -> dict[str, str]:
    """NAME=VALUE words saved NUL-separated, as a mapping."""
    return {name: value for name, _, value in (w.partition("=") for w in nul_words(data))}


def env_changes(started: Mapping[str, str], now: Mapping[str, str]) -> tuple[str, ...]:
    """`env`'s words that make the job's environment (outside the container) this shell's:
    what the user unset or set since the shell `started`. What the runtime changed itself (its
    HOME, its TMPDIR, its own variables) stays the job's outside; functions are the job's."""
    unset = [word for name in sorted(started) if name not in now for word in ("-u", name)]
    changed = [f"{k}={v}" for k, v in now.items()
               if started.get(k) != v and k and "=" not in k and not k.startswith("BASH_FUNC_")]
    return (*unset, *changed)


def relay_request(cwd: str, words: Sequence[str]) -> bytes:
    """A relayed script's directory, then env's words (env_changes), NUL-separated."""
    return b"".join(w.encode("utf-8", "surrogateescape") + b"\0" for w in (cwd, *words))


def relay(here: Path, fifo: Path, request: bytes, out: BinaryIO,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Have the dev job's script run `here`'s script outside the container; its output to
    `out` as it comes; its exit status. Ctrl-C stops the script's processes."""
    files = RelayFiles(here)
    write_atomic(files.request, request)
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno not in (errno.ENXIO, errno.ENOENT):
            raise
        raise HpctrainError(f"the dev job's script does not listen at {fifo}",
                            "is the dev job still running? start a new one with "
                            "`hpctrain dev --container IMAGE`") from None
    try:
        os.write(fd, os.fsencode(here) + b"\0")
    finally:
        os.close(fd)
    offset = 0
    while True:
        try:
            done = files.rc.exists()
            offset = _copy(files.output, offset, out)
            if done:
                break
            sleep(0.1)
        except KeyboardInterrupt:
            files.stop.touch()
    text = files.rc.read_text(encoding="utf-8").strip()
    return int(text) if text.isdigit() else 1


def _copy(path: Path, offset: int, out: BinaryIO) -> int:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    if data:
        out.write(data)
        out.flush()
    return offset + len(data)

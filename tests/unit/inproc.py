"""`hpctrain ARGS` run in the test's own process, through the entry point and its error
boundary: what a user sees (exit status, stdout, stderr), without a subprocess's start-up."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from hpctrain.cli import main


@dataclass
class Ran:
    code: int
    out: str
    err: str


Cli = Callable[..., Ran]


def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """A runner of `hpctrain ARGS` (for a `cli` fixture)."""

    def run(*args: str) -> Ran:
        monkeypatch.setattr(sys, "argv", ["hpctrain", *args])
        # --debug adds a handler on this run's stderr; a process runs one command, this
        # fixture many, and a later run's debug line would go to a closed capture.
        logger = logging.getLogger("hpctrain")
        handlers, level = list(logger.handlers), logger.level
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        finally:
            logger.handlers[:] = handlers
            logger.setLevel(level)
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run

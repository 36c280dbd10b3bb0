"""What a submit's modules leave out (issue 43: a submit at submitit's speed), and that a
listener to the debug lines still gets them."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from hpctrain.startup.debuglog import debug

SUBMIT_PATH = ("hpctrain.cli.submit", "hpctrain.submission.pipeline", "hpctrain.submission.kinds",
               "hpctrain.submission.prepare", "hpctrain.submission.questions",
               "hpctrain.slurm.client", "hpctrain.remote.connection", "hpctrain.files.yamlwrite")


def test_the_submit_path_imports_neither_logging_nor_yaml() -> None:
    probe = (f"import importlib, sys\nfor m in {SUBMIT_PATH!r}:\n    importlib.import_module(m)\n"
             "print(sorted(m for m in ('logging', 'yaml', 'jinja2', 'typer', 'rich') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_debug_line_reaches_whoever_listens(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="hpctrain")
    debug("hpctrain.slurm", "%s ran", "sbatch --parsable 'a b'")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("hpctrain.slurm", "sbatch --parsable 'a b' ran")]


def test_without_a_listener_a_debug_line_goes_nowhere() -> None:
    probe = ("import sys\nfrom hpctrain.startup.debuglog import debug\n"
             "debug('hpctrain.slurm', 'secret %s', 'x')\nassert 'logging' not in sys.modules\n"
             "import logging\ndebug('hpctrain.slurm', 'secret %s', 'y')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout == done.stderr == ""

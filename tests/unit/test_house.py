"""Where things live (issue 40): checked by reading the package, so a drift fails here."""

from __future__ import annotations

import re
from pathlib import Path

import hpctrain

PACKAGE = Path(hpctrain.__file__).parent


def _sources() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text() for p in PACKAGE.rglob("*.py")}


def test_matplotlib_is_loaded_by_one_plotting_module() -> None:
    loading = sorted(name for name, text in _sources().items()
                     if re.search(r"^\s*import matplotlib", text, re.M))
    assert loading == ["studies/plot.py"]


def test_no_jobs_package_is_left() -> None:
    assert not (PACKAGE / "jobs").exists()
    assert not [name for name, text in _sources().items() if "hpctrain.jobs" in text]

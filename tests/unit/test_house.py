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


# A decision on whether a job or command goes through a login, spelled as it was before the
# place stated it as a fact: only places/ may ask it (issue 40).
_LOCAL_OR_LOGIN = re.compile(r"(\.login|\blogin) is (not )?None|if \w+\.login\b|\.login else")
# Checking the --login value the user typed is not a decision about a place.
_ALLOWED = {("cli/jobs.py", "    if login is not None:"),
            ("cli/jobs.py",
             "        if login is not None or not all(r.terminal for r in records):")}


def test_no_local_or_login_decision_outside_places() -> None:
    found = [(name, line) for name, text in _sources().items()
             if not name.startswith("places/")
             for line in text.splitlines() if _LOCAL_OR_LOGIN.search(line)]
    assert [f for f in found if f not in _ALLOWED] == []


def test_a_new_place_is_one_class_and_one_line() -> None:
    """places/choose.py's table is where a place is chosen; nothing else names LoginPlace."""
    naming = sorted(name for name, text in _sources().items()
                    if "LoginPlace" in text and not name.startswith("places/"))
    assert naming == []

"""`hpctrain diff`'s environment part: what changed, the packages the runs imported first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpctrain.studies.compare import RunFacts, environment_changes


def _facts(packages: dict[str, str], imported: list[str] | None, python: str = "3.11.7"
           ) -> RunFacts:
    env: dict[str, Any] = {"python": python, "packages": packages,
                           "packages_sha256": str(sorted(packages.items()))}
    return RunFacts(job_id="1", plan={}, snapshot=None, manifest=None, environment=env,
                    profile=None, store=Path("/s"),
                    imports=None if imported is None else {"packages": dict.fromkeys(imported)})


def test_imported_packages_come_first_and_are_marked() -> None:
    a = _facts({"torch": "2.5", "zeta": "1", "alpha": "1"}, ["torch"])
    b = _facts({"torch": "2.6", "zeta": "2", "alpha": "2", "new": "1"}, ["torch"])
    got = [(c.what, c.a, c.b) for c in environment_changes(a, b)]
    assert got == [("torch (imported)", "2.5", "2.6"), ("alpha", "1", "2"),
                   ("new", "(not installed)", "1"), ("zeta", "1", "2")]


def test_without_imports_every_change_is_listed_plainly() -> None:
    a = _facts({"torch": "2.5"}, None, python="3.11.7")
    b = _facts({"torch": "2.6"}, None, python="3.12.1")
    got = [(c.what, c.a, c.b) for c in environment_changes(a, b)]
    assert got == [("python", "3.11.7", "3.12.1"), ("torch", "2.5", "2.6")]
    assert environment_changes(a, a) == []

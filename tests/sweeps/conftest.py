"""Fixtures of the sweep tests: an empty history."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.history import History


@pytest.fixture
def history(tmp_path: Path) -> History:
    """An empty history in a temp directory."""
    return History(tmp_path / "history.sqlite3")

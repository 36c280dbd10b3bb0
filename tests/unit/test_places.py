"""The places' own promises that need no cluster: LocalPlace.write is atomic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpctrain.places import LocalPlace


def test_local_write_never_shows_a_partial_file(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "run.json"
    target.write_text("old\n")
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def watching_replace(src: str, dst: str) -> None:
        # The moment before the swap: the target is still whole and old, the new text whole.
        seen.append((Path(dst).read_text(), Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    new = "x" * 1_000_000 + "\n"
    LocalPlace(workdir=tmp_path).write(target, new)
    assert seen == [("old\n", new)]
    assert target.read_text() == new


def test_a_failed_local_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "alternatives.txt"
    target.write_text("1 1x1\n")
    with pytest.raises(UnicodeError):
        # A lone surrogate cannot be encoded: the write fails half way through.
        LocalPlace(workdir=tmp_path).write(target, "2 2x1\n" * 1000 + "\ud800")
    assert target.read_text() == "1 1x1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alternatives.txt"]


def test_local_read_file_gives_the_last_lines_and_the_size(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"a\nb\nc\n")
    place = LocalPlace(workdir=tmp_path)
    assert place.read_file(log, None) == (b"a\nb\nc\n", 6)
    assert place.read_file(log, 2) == (b"b\nc\n", 6)
    assert place.read_file(log, 0) == (b"", 6)
    assert place.read_file(log, 5) == (b"a\nb\nc\n", 6)
    assert place.read_file(tmp_path / "none.out", None) is None

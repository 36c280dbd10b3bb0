"""The kept code of dataclass methods: the same classes as compiled, untrusted files unused."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.startup import codecache

CLASS = '''
import dataclasses

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: str = "a"
    tags: tuple[str, ...] = ()
'''


def _make(cache: codecache.CodeCache, monkeypatch: pytest.MonkeyPatch, source: str = CLASS
          ) -> type:
    monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    namespace: dict[str, object] = {}
    exec(compile(source, "<test>", "exec"), namespace)
    monkeypatch.delattr(dataclasses, "exec")
    return namespace["Point"]  # type: ignore[return-value]


def test_a_second_process_uses_the_kept_code_and_gets_the_same_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "code" / "c.marshal")
    first = codecache.CodeCache(path)
    _make(first, monkeypatch)
    assert first.new >= 5  # __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__
    first.save()
    second = codecache.CodeCache(path)
    assert len(second.codes) == first.new
    point = _make(second, monkeypatch)
    assert second.new == 0 and second.used
    p = point(1, tags=("t",))
    assert p == point(1, "a", ("t",)) and p != point(2)
    assert repr(p) == "Point(x=1, y='a', tags=('t',))"
    assert hash(p) == hash(point(1, tags=("t",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        point()  # type: ignore[call-arg]
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_changed_class_compiles_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "c.marshal")
    cache = codecache.CodeCache(path)
    _make(cache, monkeypatch)
    cache.save()
    changed = codecache.CodeCache(path)
    point = _make(changed, monkeypatch, CLASS + "    z: int = 0\n")
    assert changed.new >= 1  # __init__, __repr__, __eq__ and __hash__ name the new field
    assert repr(point(1, z=2)) == "Point(x=1, y='a', tags=(), z=2)"
    # A default is handed to the code, not written into its text: the kept code serves.
    other = codecache.CodeCache(path)
    assert _make(other, monkeypatch, CLASS.replace('y: str = "a"', "y: int = 7"))(1).y == 7


@pytest.mark.parametrize("spoil", ["garbage", "other_writable", "not_a_dict", "truncated"])
def test_a_file_that_is_not_ours_or_not_whole_reads_as_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: str) -> None:
    path = tmp_path / "c.marshal"
    cache = codecache.CodeCache(str(path))
    _make(cache, monkeypatch)
    cache.save()
    data = path.read_bytes()
    if spoil == "garbage":
        path.write_bytes(b"\x00not marshal at all")
    elif spoil == "other_writable":
        path.chmod(0o666)  # anybody could have put code there: it is never run
    elif spoil == "not_a_dict":
        import marshal

        path.write_bytes(marshal.dumps([1, 2, 3]))
    else:
        path.write_bytes(data[: len(data) // 2])
    again = codecache.CodeCache(str(path))
    assert again.codes == {}
    assert _make(again, monkeypatch)(1).y == "a"
    again.save()  # and the file is whole again
    path.chmod(0o600)
    assert len(codecache.CodeCache(str(path)).codes) == again.new


def test_a_home_that_cannot_be_written_costs_nothing_but_the_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    cache = codecache.CodeCache(str(tmp_path / "file" / "c.marshal"))  # a file as folder
    _make(cache, monkeypatch)
    cache.save()  # no exception
    assert not list(tmp_path.glob("file*/*"))


def test_the_command_line_keeps_each_commands_code_in_the_home_and_can_be_told_not_to(
        tmp_path: Path) -> None:
    env = {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "hpctrain", "render", "--profile", "raven", "--nodes", "2",
            "--dry-run"]
    folder = tmp_path / "home" / "state" / "cache" / "code" / sys.implementation.cache_tag
    kept = folder / "render.marshal"
    off = subprocess.run(argv, env={**env, "HPCTRAIN_CODE_CACHE": "0"}, capture_output=True,
                         text=True, check=True)
    assert not folder.exists()
    cold = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    size = kept.stat().st_size
    warm = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    assert cold.stdout == warm.stdout == off.stdout and "#SBATCH" in warm.stdout
    assert kept.stat().st_size == size  # nothing new compiled: not written again
    subprocess.run([*argv[:3], "--help"], env=env, capture_output=True, check=True)
    typo = subprocess.run([*argv[:3], "rendr"], env=env, capture_output=True)
    assert typo.returncode == 2
    assert sorted(p.name for p in folder.iterdir()) == ["render.marshal", "root.marshal"]
    assert (folder / "root.marshal").stat().st_size < size / 2


@pytest.mark.parametrize(("argv", "command"), [
    ([], "root"), (["--help"], "root"), (["--debug", "status", "-w"], "status"),
    (["submit", "-P", "x", "--", "hostname"], "submit"), (["../etc"], "root"),
    (["Render"], "root"), (["scale-report"], "scale-report")])
def test_the_command_is_the_first_word(argv: list[str], command: str) -> None:
    assert codecache.command_of(argv) == command

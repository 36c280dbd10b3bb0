"""The snapshot store on real files: what is frozen, what is shared, what a job sees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.snapshots.freeze import freeze
from hpctrain.snapshots.gc import collect
from hpctrain.snapshots.index import git_view
from hpctrain.snapshots.listing import check_project, project_files
from hpctrain.snapshots.model import Limits, Listing, Snapshot, SnapshotError
from hpctrain.snapshots.objects import manifest_of
from hpctrain.snapshots.spec import (
    CodeSpec,
    check_here,
    code_spec,
    freeze_here,
    script_source,
)
from hpctrain.snapshots.workdir import link_code

OLD = 1_600_000_000  # a file time well outside the index's 2 s racy window
HOSTILE = ["with space.py", "quote'd.py", 'dq"x.py', "semi;colon.py", "$(touch pwned).py",
           "-leading.py", "ünï.py"]


def _project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "alias.py").symlink_to("pkg/mod.py")
    return root


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def _manifest_paths(store_dir: Path, snap_id: str) -> set[str]:
    m = manifest_of(store_dir, snap_id)
    return {row[0] for row in m["files"]} | {row[0] for row in m["links"]}  # type: ignore[attr-defined]


def test_the_same_project_is_the_same_snapshot_and_an_edit_adds_one_file(tmp_path: Path
                                                                        ) -> None:
    root, st = _project(tmp_path / "p"), tmp_path / "store"
    first = freeze(root, st)
    # Three files and a symlink (a manifest entry, no object).
    assert (first.files, first.added_files, first.source) == (3, 3, "walk")
    again = freeze(root, st)
    assert again.id == first.id and again.added_files == 0
    objects = sorted(st.glob("objects/*/*"))
    (root / "pkg" / "mod.py").write_text("VALUE = 2\n")
    edited = freeze(root, st)
    assert edited.id != first.id and edited.added_files == 1
    assert len(sorted(st.glob("objects/*/*"))) == len(objects) + 1
    # Each snapshot keeps its own content.
    assert (first.tree / "pkg" / "mod.py").read_text() == "VALUE = 1\n"
    assert (edited.tree / "pkg" / "mod.py").read_text() == "VALUE = 2\n"


def test_modes_links_and_read_only_tree(tmp_path: Path) -> None:
    root, st = _project(tmp_path / "p"), tmp_path / "store"
    snap = freeze(root, st)
    assert os.access(snap.tree / "run.sh", os.X_OK)
    assert not os.stat(snap.tree / "pkg" / "mod.py").st_mode & 0o222
    assert os.readlink(snap.tree / "alias.py") == "pkg/mod.py"
    assert not os.stat(snap.tree / "pkg").st_mode & 0o222
    # The tree's files are the store's objects (hard links), not copies.
    assert os.stat(snap.tree / "pkg" / "mod.py").st_nlink >= 2


def test_walk_leaves_out_hidden_dirs_caches_venvs_and_the_runs_folder(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    for d in (".git", "pkg/__pycache__", "venv", "hpctrain-runs/run1"):
        (root / d).mkdir(parents=True)
        (root / d / "f.py").write_text("x")
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    snap = freeze(root, tmp_path / "store", keep_out=("hpctrain-runs",))
    assert _manifest_paths(tmp_path / "store", snap.id) == {
        "pkg/__init__.py", "pkg/mod.py", "run.sh", "alias.py"}


def test_in_git_it_freezes_what_git_lists(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / ".gitignore").write_text("data/\n")
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_bytes(b"x" * 10)
    _git(root, "init", "-q")
    _git(root, "add", "pkg", ".gitignore")
    _git(root, "commit", "-q", "-m", "init")
    (root / "new_untracked.py").write_text("y = 1\n")
    snap = freeze(root, tmp_path / "store")
    assert snap.source == "git"
    assert _manifest_paths(tmp_path / "store", snap.id) == {
        ".gitignore", "pkg/__init__.py", "pkg/mod.py", "run.sh", "alias.py", "new_untracked.py"}


def test_too_large_names_the_largest_files_and_the_ways_out(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    (root / "weights.bin").write_bytes(b"w" * 3000)
    (root / "other.bin").write_bytes(b"o" * 2000)
    with pytest.raises(SnapshotError) as e:
        freeze(root, tmp_path / "store", limits=Limits(max_file_bytes=1000))
    assert "2 file(s) over" in e.value.what and e.value.what.index("weights.bin") < \
        e.value.what.index("other.bin")
    assert "--in-place" in e.value.fix and "--no-snapshot" in e.value.fix
    with pytest.raises(SnapshotError, match=r"5 files, 4.9 KiB \(over 100 bytes\)"):
        check_project(root, limits=Limits(max_total_bytes=100))
    assert not (tmp_path / "store").exists()  # refused before anything was written
    # Named in place, the file is not frozen and the job reads it where it is.
    snap = freeze(root, tmp_path / "store", in_place=("weights.bin", "other.bin"),
                        limits=Limits(max_file_bytes=1000))
    code = tmp_path / "run" / "code"
    link_code(code, snap, root)
    assert os.readlink(code / "weights.bin") == str(root / "weights.bin")


@pytest.mark.parametrize("bad", ["/etc", "../outside", "missing", ""])
def test_bad_in_place_paths_are_refused(tmp_path: Path, bad: str) -> None:
    root = _project(tmp_path / "p")
    with pytest.raises(SnapshotError, match="--in-place"):
        freeze(root, tmp_path / "store", in_place=(bad,))


def test_the_job_directory_links_the_snapshot_and_leaves_out_what_it_left_out(tmp_path: Path
                                                                            ) -> None:
    root = _project(tmp_path / "p")
    (root / "data" / "mnist").mkdir(parents=True)
    (root / "pkg" / "assets").mkdir()
    (root / "pkg" / "assets" / "a.txt").write_text("a")
    (root / ".git").mkdir()
    runs = root / "hpctrain-runs"
    spec = code_spec(root, runs / "job-1", in_place=("pkg/assets", "data"))
    assert spec.keep_out == ("hpctrain-runs",) and spec.store == runs / ".snapshots"
    snap = freeze_here(spec)
    code = spec.code_dir
    assert os.path.realpath(code / "pkg" / "mod.py") == str(snap.tree / "pkg" / "mod.py")
    # A nested in-place path: its parent is a directory of links, the path itself is live.
    assert (code / "pkg").is_dir() and not (code / "pkg").is_symlink()
    assert os.readlink(code / "pkg" / "assets") == str(root / "pkg" / "assets")
    assert os.readlink(code / "data") == str(root / "data")
    assert not (code / ".git").exists() and not (code / "hpctrain-runs").exists()
    # What the job writes at the top stays in its own run directory.
    (code / "out.txt").write_text("result")
    assert not (snap.tree / "out.txt").exists()
    # Editing the project changes nothing the job sees.
    (root / "pkg" / "mod.py").write_text("VALUE = 99\n")
    assert (code / "pkg" / "mod.py").read_text() == "VALUE = 1\n"


def test_a_file_changing_while_it_is_copied_is_refused(tmp_path: Path, monkeypatch:
                                                       pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p")
    real_copy = shutil.copyfile

    def copy_then_edit(src: str, dst: str) -> None:
        real_copy(src, dst)
        Path(dst).write_text("changed underneath")

    monkeypatch.setattr(shutil, "copyfile", copy_then_edit)
    with pytest.raises(SnapshotError, match="changed while it was being snapshotted"):
        freeze(root, tmp_path / "store")
    assert not list((tmp_path / "store").glob("objects/*/*[!p]"))


def _indexed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A project frozen once with its files stamped long ago, so that the index holds them:
    (project, store, index file)."""
    root, st = _project(tmp_path / "p"), tmp_path / "store"
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            os.utime(f, (OLD, OLD))
    freeze(root, st)
    (index,) = (st / "index").glob("*.json")
    return root, st, index


def test_the_index_skips_rehashing_but_not_a_changed_file(tmp_path: Path) -> None:
    root, st, index = _indexed(tmp_path)
    cached = json.loads(index.read_text())
    assert set(cached) == {"pkg/__init__.py", "pkg/mod.py", "run.sh"}
    # Same size and time, other content, other inode: the inode tells.
    (root / "pkg" / "mod.py").unlink()
    (root / "pkg" / "mod.py").write_text("VALUE = 7\n")
    os.utime(root / "pkg" / "mod.py", (OLD, OLD))
    snap = freeze(root, st)
    assert (snap.tree / "pkg" / "mod.py").read_text() == "VALUE = 7\n"


def test_hostile_names_are_frozen_and_linked_whole(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    for name in HOSTILE:
        (root / name).write_text(f"# {name}\n")
    spec = CodeSpec(project=root, store=tmp_path / "s", code_dir=tmp_path / "r" / "code",
                    in_place=("-leading.py",))
    snap = freeze_here(spec)
    for name in HOSTILE:
        assert (spec.code_dir / name).read_text() == f"# {name}\n"
    assert os.readlink(spec.code_dir / "-leading.py") == str(root / "-leading.py")
    assert not (root / "pwned").exists() and not Path("pwned").exists()
    assert snap.files == 3 + len(HOSTILE) - 1


def test_the_script_runs_alone_as_a_login_runs_it(tmp_path: Path) -> None:
    """A login runs the snapshot modules with `python3 -c SOURCE` and no hpctrain installed:
    isolated mode (-I) and an empty directory prove they import nothing else of hpctrain."""
    root = _project(tmp_path / "p")
    (root / "data").mkdir()
    (root / "stale.py").write_text("left over from an earlier sync\n")
    names = ["pkg/__init__.py", "pkg/mod.py", "run.sh", "alias.py", *HOSTILE[:2]]
    for name in HOSTILE[:2]:
        (root / name).write_text("x\n")
    code_dir = tmp_path / "run" / "code"
    done = subprocess.run(
        [sys.executable, "-I", "-c", script_source(), "freeze", str(root), str(tmp_path / "s"),
         str(code_dir), "--in-place", "data"],
        input=b"".join(n.encode() + b"\0" for n in names), capture_output=True,
        cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout)
    assert answer["files"] == 5 and answer["source"] == "list"
    assert _manifest_paths(tmp_path / "s", answer["id"]) == set(names)
    assert not os.path.lexists(code_dir / "stale.py")
    assert os.readlink(code_dir / "data") == str(root / "data")
    bad = subprocess.run(
        [sys.executable, "-I", "-c", script_source(), "freeze", str(root), str(tmp_path / "s"),
         str(tmp_path / "run2" / "code"), "--in-place", "nope"], input=b"",
        capture_output=True, check=False)
    assert bad.returncode == 3 and "--in-place nope" in json.loads(bad.stdout)["error"]


def test_a_file_edited_just_now_is_hashed_again_and_the_index_kept(tmp_path: Path) -> None:
    root, st, index = _indexed(tmp_path)
    before = index.read_text()
    for version in ("VALUE = 2\n", "VALUE = 3\n"):
        (root / "pkg" / "mod.py").write_text(version)  # now: within the racy window
        snap = freeze(root, st)
        assert (snap.tree / "pkg" / "mod.py").read_text() == version
        assert index.read_text() == before


def _committed(tmp_path: Path) -> tuple[Path, Path]:
    """A git project with everything committed and an ignored runs folder: (project, store)."""
    root = _project(tmp_path / "p")
    (root / ".gitignore").write_text("runs/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "p")
    return root, tmp_path / "store"


def _submit_like(root: Path, st: Path) -> tuple[Listing, Snapshot]:
    """What a local submit does: check, then freeze what the check listed."""
    listing = check_project(root, keep_out=("runs",), store=st)
    return listing, freeze(root, st, keep_out=("runs",), listing=listing)


def test_an_unchanged_git_project_is_known_without_listing_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every edit below changes a size or a name, so the racy window is not what is tested.
    monkeypatch.setattr("hpctrain.snapshots.index.RACY_S", 0.0)
    root, st = _committed(tmp_path)
    listing, first = _submit_like(root, st)
    assert listing.known is None and listing.state and first.added_files == 4
    listing, again = _submit_like(root, st)
    assert listing.known is not None and listing.entries == []
    assert (again.id, again.files, again.added_files) == (first.id, first.files, 0)
    # What the job's directory is made from is the same whole tree.
    assert again.tree == first.tree and (again.tree / "pkg" / "mod.py").is_file()
    (root / "runs" / "job1").mkdir(parents=True)  # ignored and kept out: still the same
    assert _submit_like(root, st)[0].known is not None


@pytest.mark.parametrize("change", ["edit tracked", "new untracked", "delete tracked",
                                    "chmod", "tree collected"])
def test_any_change_git_or_the_store_sees_makes_a_new_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    monkeypatch.setattr("hpctrain.snapshots.index.RACY_S", 0.0)
    root, st = _committed(tmp_path)
    _, first = _submit_like(root, st)
    mod = root / "pkg" / "mod.py"
    if change == "edit tracked":
        mod.write_text("VALUE = 22\n")
    elif change == "new untracked":
        (root / "pkg" / "new.py").write_text("NEW = 1\n")
    elif change == "delete tracked":
        mod.unlink()
    elif change == "chmod":
        mod.chmod(0o755)
    else:
        collect(st, set(), grace_s=0)
    listing, snap = _submit_like(root, st)
    assert listing.known is None and listing.entries
    expected = {"edit tracked": "VALUE = 22\n", "new untracked": "VALUE = 1\n",
                "chmod": "VALUE = 1\n", "tree collected": "VALUE = 1\n"}.get(change)
    frozen = snap.tree / "pkg" / "mod.py"
    assert (frozen.read_text() if frozen.exists() else None) == expected
    assert (snap.id == first.id) == (change == "tree collected")
    assert (snap.tree / "pkg" / "new.py").exists() == (change == "new untracked")
    assert os.access(frozen, os.X_OK) == (change == "chmod")
    # The new state is remembered in its turn.
    known = _submit_like(root, st)[0].known
    assert known is not None and known.id == snap.id


def test_git_view_is_not_trusted_with_attributes_fresh_edits_or_outside_git(
        tmp_path: Path) -> None:
    root, _ = _committed(tmp_path)
    # Files written just now: inside the racy window, where a stat may hide an edit.
    (root / "pkg" / "fresh.py").write_text("x = 1\n")
    assert git_view(root, ()) is None
    (root / "pkg" / "fresh.py").unlink()
    assert git_view(root, ("runs",)) is not None
    (root / "pkg" / ".gitattributes").write_text("*.py text eol=crlf\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "attributes")
    assert git_view(root, ()) is None
    assert git_view(_project(tmp_path / "plain"), ()) is None


@pytest.mark.parametrize("git_has_exclude", [True, False])
def test_git_is_not_asked_to_walk_what_is_left_out_and_an_older_git_still_serves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_has_exclude: bool) -> None:
    """The runs folder (not ignored here) grows with every submit: git leaves it unwalked.
    A git without exclude pathspecs (before 1.9) is asked for everything, as before."""
    monkeypatch.setattr("hpctrain.snapshots.index.RACY_S", 0.0)
    root, st = _committed(tmp_path)
    (root / ".gitignore").unlink()
    runs, data = root / "runs dir", root / "a*;$(x)"
    for i in range(30):
        (runs / f"job{i}").mkdir(parents=True)
        (runs / f"job{i}" / "slurm.out").write_text("x")
    data.mkdir()
    (data / "big.bin").write_text("data")
    (root / "astray.py").write_text("")
    if not git_has_exclude:
        # git 1.8 (RHEL 7's) answers an exclude pathspec so: a git on PATH that does the same.
        old = tmp_path / "old-git"
        old.mkdir()
        (old / "git").write_text(
            '#!/bin/sh\nfor a in "$@"; do case "$a" in ":(exclude"*)\n'
            '  echo "fatal: Unimplemented pathspec magic" >&2; exit 128;; esac; done\n'
            f'exec {shutil.which("git")} "$@"\n')
        (old / "git").chmod(0o755)
        monkeypatch.setenv("PATH", f"{old}:{os.environ['PATH']}")
    left = ("runs dir", "a*;$(x)")
    names = project_files(root, left)
    assert names is not None and "astray.py" in names and "pkg/mod.py" in names
    assert bool([n for n in names if n.startswith(left)]) == (not git_has_exclude)
    listing, snap = _submit_like_left_out(root, st, left)
    assert {"pkg/mod.py", "astray.py"} <= _manifest_paths(st, snap.id)
    assert not [n for n in _manifest_paths(st, snap.id) if n.startswith(left)]
    state = listing.state
    (runs / "job30").mkdir()
    (runs / "job30" / "slurm.out").write_text("x")
    again, _ = _submit_like_left_out(root, st, left)
    assert state is not None and again.known is not None and again.state == state


def _submit_like_left_out(root: Path, st: Path, left: tuple[str, str]
                          ) -> tuple[Listing, Snapshot]:
    listing = check_project(root, keep_out=left[:1], in_place=left[1:], store=st)
    return listing, freeze(root, st, keep_out=left[:1], in_place=left[1:],
                                 listing=listing)


def test_a_login_submit_lists_every_file_whatever_this_machine_remembers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hpctrain.snapshots.index.RACY_S", 0.0)
    root, _ = _committed(tmp_path)
    spec = code_spec(root, root / "runs" / "r1", ())
    freeze_here(check_here(spec, root))
    assert check_here(spec, root).listing.known is not None  # type: ignore[union-attr]
    # A login freezes, on its side, exactly the names listed here.
    remote = check_here(spec, root, in_place_here=False).listing
    assert remote is not None and remote.known is None and len(remote.entries) == 5

"""The validated-profile cache: one JSON file per merged profile content and hpctrain version.

A second, smaller index maps a profile file (with the profile names it could extend) to the
content key, together with the size, times and inode of every file its `extends:` chain
read: when none of them changed, the profile loads without reading YAML at all.

Plain JSON, never pickle: hpctrain runs on shared systems, and a cache file must not be able
to run code when read. Anything unexpected in a file (unreadable, not UTF-8, not JSON, the
wrong shape, version or key, not the user's own) counts as a miss, and the caller rebuilds it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpctrain import __version__
from hpctrain.files import paths
from hpctrain.files.atomic import read_own_file, write_atomic
from hpctrain.profiles.model import Profile
from hpctrain.profiles.plain import from_plain

# Bumped when the file layout changes (2: node types), so older files read as misses.
FORMAT = 2
# Shipped profiles take a few kilobytes; anything far larger is not ours.
_MAX_BYTES = 1 << 20
# Two seconds: coarser than any file system's timestamps hpctrain meets.
_RACY_NS = 2_000_000_000


def cache_key(data: dict[str, Any]) -> str:
    """The key of a merged profile's content under this hpctrain version."""
    import hashlib

    blob = json.dumps([__version__, data], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def cache_file(key: str) -> Path:
    return paths.state_dir() / "cache" / "profiles" / f"{key}.json"


def source_key(path: Path, candidates: Mapping[str, Path]) -> list[Any]:
    """A profile file as found now: its path and every profile name it may extend."""
    names = sorted([name, str(p)] for name, p in candidates.items())
    return [__version__, str(path.resolve()), names]


def _sources_file(key: list[Any]) -> Path:
    # crc32 only names the file (zlib loads in a fraction of hashlib's time); the whole key is
    # stored in it and compared, so two keys that share a name only cost a miss.
    name = zlib.crc32(json.dumps(key).encode("utf-8", "surrogateescape"))
    return paths.state_dir() / "cache" / "profile-sources" / f"{name:08x}.json"


def _stamp(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def read_by_sources(key: list[Any]) -> Profile | None:
    """The cached profile for a source key, if no file of its `extends:` chain has changed."""
    doc = _read_json(_sources_file(key))
    if not _sources_ok(doc, key):
        return None
    if any(_stamp(Path(name)) != stamp for name, stamp in doc["files"]):
        return None
    return read_cached(doc["content"])


def _sources_ok(doc: Any, key: list[Any]) -> bool:
    return (
        type(doc) is dict
        and set(doc) == {"format", "hpctrain", "key", "files", "content"}
        and (doc["format"], doc["hpctrain"], doc["key"]) == (FORMAT, __version__, key)
        and type(doc["content"]) is str
        and type(doc["files"]) is list
        and all(type(f) is list and len(f) == 2 and type(f[0]) is str for f in doc["files"])
    )


def write_sources(key: list[Any], files: list[Path], content_key: str) -> None:
    """Record which files (as they are now) make up the profile with `content_key`."""
    stamps = [(str(f.resolve()), _stamp(f)) for f in files]
    # Like git's "racy" check: a file changed within the clock's resolution of now could
    # change again without a new stamp, so it is not recorded (the next load re-reads it).
    recent = time.time_ns() - _RACY_NS
    if any(s is None or s[1] >= recent or s[2] >= recent for _, s in stamps):
        return
    doc = {"format": FORMAT, "hpctrain": __version__, "key": key,
           "files": [[name, s] for name, s in stamps], "content": content_key}
    _write_json(_sources_file(key), doc)


def read_cached(key: str) -> Profile | None:
    """The cached profile for `key`, or None when there is no usable cache file."""
    doc = _read_json(cache_file(key))
    if not _envelope_ok(doc, key):
        return None
    try:
        return from_plain(Profile, doc["profile"])
    except (ValueError, RecursionError):
        return None


def _read_json(path: Path) -> Any:
    """The document in one of the user's own cache files; None: missing, not ours, not JSON."""
    raw = read_own_file(path, _MAX_BYTES)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # includes UnicodeDecodeError and JSONDecodeError
        return None


def _envelope_ok(doc: Any, key: str) -> bool:
    return (
        type(doc) is dict
        and set(doc) == {"format", "hpctrain", "key", "profile"}
        and doc["format"] == FORMAT
        and doc["hpctrain"] == __version__
        and doc["key"] == key
    )


def write_cached(key: str, profile: Profile) -> None:
    """Store `profile` under `key` atomically, readable by the user only."""
    doc = {
        "format": FORMAT,
        "hpctrain": __version__,
        "key": key,
        "profile": dataclasses.asdict(profile),
    }
    _write_json(cache_file(key), doc)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    # A read-only or full home only costs speed: the profile was validated either way.
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, json.dumps(doc, ensure_ascii=False, separators=(",", ":")), 0o600)
    except (OSError, UnicodeError):
        pass

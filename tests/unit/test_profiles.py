import dataclasses
import json
import os
import pickle
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import ProfileError
from hpctrain.profiles import Profile, list_profiles, load_profile, load_profile_file
from hpctrain.profiles.plain import from_plain

SHIPPED = ["gilbreth", "local", "marvin", "raven"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def user_profile(home: Path, name: str, text: str) -> Path:
    d = home / "config" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_load(name: str) -> None:
    p = load_profile(name)
    assert p.name == name
    assert p.partitions
    assert p.sources


def test_shipped_facts() -> None:
    raven = load_profile("raven")
    gpu = raven.partition("gpu")
    assert gpu is not None
    assert (gpu.gpus_per_node, gpu.cpus_per_node, gpu.mem_per_node_mb) == (4, 72, 500000)
    assert gpu.allowed_gpus_per_node == [1, 2, 4]
    assert gpu.implicit and gpu.default_constraint == "gpu"
    assert raven.partition("gpudev") is not None
    assert raven.shared_node.cpus_per_gpu == 18 and raven.shared_node.mem_per_gpu_mb == 125000
    gil = load_profile("gilbreth")
    assert gil.account == "required" and gil.gpu_request == "gpus_per_node"
    training = gil.partition("training")
    assert training is not None and training.required_qos == "training"
    assert gil.nccl.socket_ifname == "ib"  # a prefix: names vary per node
    marvin = load_profile("marvin")
    names = {p.name for p in marvin.partitions}
    assert {"sgpu_devel", "sgpu_long", "mlgpu_short"} <= names
    assert "sgpu" not in names
    assert marvin.environment.module_use == ["/opt/software/easybuild-AMD/modules/all"]


def test_list_profiles_shows_user_override(_home: Path) -> None:
    user_profile(_home, "raven", "extends: raven\ndefault_account: mylab\n")
    user_profile(_home, "mine", "extends: local\ndescription: my cluster\n")
    infos = {i.name: i for i in list_profiles()}
    assert set(SHIPPED) <= set(infos)
    assert infos["raven"].source == "user" and infos["raven"].shadows_shipped
    assert infos["mine"].source == "user"
    assert load_profile("raven").default_account == "mylab"
    assert load_profile("mine").description == "my cluster"


def test_extends_merges_nested_fields(_home: Path) -> None:
    user_profile(_home, "myraven", "extends: raven\nnccl:\n  socket_ifname: ib0\n")
    p = load_profile("myraven")
    assert p.name == "myraven"
    assert p.nccl.socket_ifname == "ib0"
    assert p.environment.modules == ["gcc/13", "cuda/12.6"]  # kept from raven


def test_extends_unknown_and_loop(_home: Path) -> None:
    user_profile(_home, "a", "extends: nosuch\n")
    with pytest.raises(ProfileError, match="extends unknown profile 'nosuch'"):
        load_profile("a")
    user_profile(_home, "b", "extends: c\n")
    user_profile(_home, "c", "extends: b\n")
    with pytest.raises(ProfileError, match="extends loop"):
        load_profile("b")


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\npartitions: [\n")
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    assert str(f) in str(e.value) and "line" in str(e.value)


def test_invalid_fields_one_line_each(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ncluster: c\ngpu_request: magic\nparitions: []\n"
        "partitions:\n  - name: p\n    gpus_per_node: -1\n    cpus_per_node: 4\n"
        "    mem_per_node_mb: 100\n    max_time: forever\n"
    )
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    lines = e.value.what.splitlines()
    assert all(line.startswith(f"{f}:") for line in lines)
    text = e.value.what
    assert f"{f}:3: gpu_request" in text
    assert f"{f}:4: paritions: unknown field" in text
    assert f"{f}:7: partitions[name=p].gpus_per_node" in text
    assert f"{f}:10: partitions[name=p].max_time" in text


def test_inconsistent_profile(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ncluster: c\npartitions:\n"
        "  - {name: p, gpus_per_node: 2, cpus_per_node: 4, mem_per_node_mb: 100,"
        " max_time: '1:00:00', required_qos: gold, allowed_gpus_per_node: [1, 3]}\n"
    )
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    assert "allowed_gpus_per_node" in e.value.what


def test_not_a_mapping(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ProfileError, match="mapping"):
        load_profile_file(f)


def test_unknown_profile_lists_known() -> None:
    with pytest.raises(ProfileError) as e:
        load_profile("nosuch")
    assert "raven" in str(e.value)


def _cache_files(home: Path) -> list[Path]:
    return sorted((home / "state" / "cache" / "profiles").glob("*"))


def _warm_raven(home: Path) -> tuple[Profile, Path, bytes]:
    fresh = load_profile("raven")  # a miss: validated by pydantic, then cached
    (cache,) = _cache_files(home)
    return fresh, cache, cache.read_bytes()


def test_cache_is_private_json(_home: Path) -> None:
    fresh, cache, raw = _warm_raven(_home)
    assert cache.suffix == ".json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    doc = json.loads(raw)
    assert doc["key"] == cache.stem and doc["profile"]["name"] == "raven"
    assert load_profile("raven") == fresh


@pytest.mark.parametrize("name", SHIPPED)
def test_cache_hit_equals_validated(name: str) -> None:
    fresh = load_profile(name)
    assert load_profile(name) == fresh
    assert from_plain(Profile, dataclasses.asdict(fresh)) == fresh


def _edit(raw: bytes, change: Callable[[dict[str, Any]], object]) -> bytes:
    doc = json.loads(raw)
    change(doc)
    return json.dumps(doc).encode()


def _set(path: str, value: object) -> Callable[[dict[str, Any]], object]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return change


CORRUPT: dict[str, Callable[[bytes], bytes]] = {
    "garbage bytes": lambda raw: bytes(range(256)) * 4,
    "not UTF-8": lambda raw: raw.replace(b'"raven"', b'"rav\xffen"'),
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "JSON of the wrong shape": lambda raw: b"[1, 2, 3]",
    "profile of the wrong shape": lambda raw: _edit(raw, _set("profile", ["raven"])),
    "wrong format": lambda raw: _edit(raw, _set("format", 0)),
    "wrong version": lambda raw: _edit(raw, _set("hpctrain", "0.0.0-old")),
    "wrong key": lambda raw: _edit(raw, _set("key", "0" * 64)),
    "int field as string": lambda raw: _edit(raw, _set("profile.partitions.0.gpus_per_node", "4")),
    "int field as bool": lambda raw: _edit(raw, _set("profile.partitions.0.gpus_per_node", True)),
    "list field as string": lambda raw: _edit(raw, _set("profile.sources", "R1")),
    "literal out of range": lambda raw: _edit(raw, _set("profile.gpu_request", "magic")),
    "value out of bounds": lambda raw: _edit(raw, _set("profile.shared_node.cpus_per_gpu", 0)),
    "bad SLURM time": lambda raw: _edit(raw, _set("profile.partitions.0.max_time", "forever")),
    "inconsistent profile": lambda raw: _edit(raw, _set("profile.partitions.1.name", "gpu")),
    "unknown field": lambda raw: _edit(raw, _set("profile.nccl.surprise", 1)),
    "missing field": lambda raw: _edit(raw, lambda d: d["profile"].pop("cluster")),
    "deep nesting": lambda raw: b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("how", CORRUPT)
def test_corrupt_cache_is_ignored_and_rewritten(_home: Path, how: str) -> None:
    fresh, cache, good = _warm_raven(_home)
    cache.write_bytes(CORRUPT[how](good))
    assert load_profile("raven") == fresh
    assert cache.read_bytes() == good


def test_cache_writable_by_others_is_not_trusted(_home: Path) -> None:
    fresh, cache, good = _warm_raven(_home)
    cache.write_bytes(_edit(good, _set("profile.description", "planted")))
    cache.chmod(0o666)
    assert load_profile("raven") == fresh
    assert cache.read_bytes() == good and stat.S_IMODE(cache.stat().st_mode) == 0o600


def test_old_pickle_cache_is_never_loaded(_home: Path) -> None:
    fresh, cache, _ = _warm_raven(_home)
    cache.unlink()
    marker = _home / "pwned"
    # A pickle that would create `marker` if anything unpickled it.
    planted = pickle.dumps(_Planted(str(marker)))
    cache.with_suffix(".pickle").write_bytes(planted)
    assert load_profile("raven") == fresh
    assert not marker.exists()


class _Planted:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def test_cache_hit_does_not_import_pydantic(_home: Path) -> None:
    code = (
        "import sys\n"
        "from hpctrain.profiles import load_profile\n"
        "load_profile('raven')\n"
        "print(sorted(m for m in ('pydantic', 'annotated_types', 'pickle') if m in sys.modules))\n"
    )
    env = {**os.environ, "HPCTRAIN_HOME": str(_home)}
    load_profile("raven")  # warms the cache in this HPCTRAIN_HOME
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
    assert len(_cache_files(_home)) == 1


def test_unchanged_profile_loads_without_yaml(_home: Path) -> None:
    code = (
        "import sys\n"
        "from hpctrain.profiles import load_profile\n"
        "load_profile('raven')\n"
        "print(sorted(m for m in ('yaml', 'pydantic') if m in sys.modules))\n"
    )
    env = {**os.environ, "HPCTRAIN_HOME": str(_home)}
    load_profile("raven")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_an_edited_profile_is_read_again(_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpctrain.profiles import cache

    # Files written a moment ago are normally not indexed (their stamps may not change yet).
    monkeypatch.setattr(cache, "_RACY_NS", 0)
    path = user_profile(_home, "mine", "extends: raven\ndefault_account: proj1\n")
    assert load_profile("mine").default_account == "proj1"
    assert load_profile("mine").default_account == "proj1"  # from the index
    path.write_text("extends: raven\ndefault_account: proj2\n")
    assert load_profile("mine").default_account == "proj2"


def test_a_new_user_profile_changes_what_extends_finds(
    _home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpctrain.profiles import cache

    monkeypatch.setattr(cache, "_RACY_NS", 0)
    user_profile(_home, "mine", "extends: raven\n")
    assert load_profile("mine").default_account is None
    # A user raven.yaml now shadows the shipped one that `mine` extends.
    user_profile(_home, "raven", "extends: raven\ndefault_account: shadow\n")
    assert load_profile("mine").default_account == "shadow"

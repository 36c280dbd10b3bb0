"""Find, merge (`extends:`) and validate profile files; user profiles override shipped ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import ProfileError
from hpctrain.files import paths
from hpctrain.files.resources import profiles_dir
from hpctrain.profiles.cache import (
    cache_key,
    read_by_sources,
    read_cached,
    source_key,
    write_cached,
    write_sources,
)
from hpctrain.profiles.model import Profile

if TYPE_CHECKING:
    from pydantic import ValidationError

_MAX_EXTENDS = 8


@dataclass(frozen=True)
class ProfileInfo:
    """A profile by name: its file, and whether it is shipped or the user's."""

    name: str
    path: Path
    source: str  # "shipped" or "user"
    shadows_shipped: bool = False


def _candidates() -> dict[str, ProfileInfo]:
    found: dict[str, ProfileInfo] = {}
    for f in sorted(profiles_dir().glob("*.yaml")):
        found[f.stem] = ProfileInfo(f.stem, f, "shipped")
    user_dir = paths.user_profiles_dir()
    if user_dir.is_dir():
        for f in sorted([*user_dir.glob("*.yaml"), *user_dir.glob("*.yml")]):
            found[f.stem] = ProfileInfo(f.stem, f, "user", shadows_shipped=f.stem in found)
    return found


def list_profiles() -> list[ProfileInfo]:
    """All profiles by name, user ones replacing shipped ones of the same name."""
    return sorted(_candidates().values(), key=lambda p: p.name)


def read_yaml_mapping(path: Path, fix: str) -> dict[str, Any]:
    """A profile file's YAML mapping; ProfileError names the file, and `fix` if no mapping."""
    # Imported here: a profile whose files have not changed loads from the cache without YAML.
    import yaml

    from hpctrain.files import yamlread

    try:
        data = yamlread.load(yamlread.read_text(path))
    except yamlread.YamlInputError as e:
        raise ProfileError(f"{path}: {e.what}", e.fix) from None
    except yaml.YAMLError as e:
        bad = yamlread.syntax_error(e)
        raise ProfileError(f"{path}: {bad.what}", bad.fix) from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile must be a YAML mapping", fix)
    return data


# Lists of named entries merge by name, so a user profile changes one partition or node type
# without restating the rest; every other list replaces the base's.
_NAMED_LISTS = ("partitions", "node_types")
_FLAT_SHAPE = ("gpus_per_node", "cpus_per_node", "mem_per_node_mb")


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; named lists merge by name; other lists and scalars replace."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        elif k in _NAMED_LISTS and _named(v) and _named(out.get(k)):
            out[k] = _merge_named(out[k], v)
        else:
            out[k] = v
    if over.get("node_types") and not base.get("node_types"):
        # Types given to a flat partition replace its one implicit shape.
        for flat in _FLAT_SHAPE:
            if flat not in over:
                out.pop(flat, None)
    return out


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and isinstance(item.get("name"), str) for item in value
    )


def _merge_named(base: list[dict[str, Any]], over: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of `over` merge into the base's entry of the same name, or are appended."""
    out = list(base)
    index = {item["name"]: i for i, item in enumerate(out)}
    for item in over:
        i = index.get(item["name"])
        if i is None:
            index[item["name"]] = len(out)
            out.append(item)
        else:
            out[i] = _deep_merge(out[i], item)
    return out


def _resolve(path: Path, chain: tuple[Path, ...], read: list[Path]) -> dict[str, Any]:
    read.append(path)
    data = read_yaml_mapping(path, "see `hpctrain profiles show raven`")
    # A profile is named after its file unless it says otherwise, also when it extends one.
    data.setdefault("name", path.stem)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ProfileError(f"{path}: extends must be a profile name", "e.g. `extends: raven`")
    info = _parent(path, parent)
    if info.path.resolve() in chain or len(chain) >= _MAX_EXTENDS:
        names = " -> ".join([*(p.stem for p in chain), parent])
        raise ProfileError(f"{path}: extends loop: {names}", "break the cycle")
    base = _resolve(info.path, (*chain, info.path.resolve()), read)
    return _deep_merge(base, data)


def _parent(path: Path, parent: str) -> ProfileInfo:
    """The profile file that `path` extends under the name `parent`."""
    cands = _candidates()
    info = cands.get(parent)
    # A user file named like the shipped profile it extends extends the shipped one.
    if info is not None and info.path.resolve() == path.resolve():
        shipped = profiles_dir() / f"{parent}.yaml"
        if not shipped.is_file():
            raise ProfileError(
                f"{path}: extends itself ({parent!r} is this file, and no shipped profile "
                "has that name)",
                "extend another profile, e.g. `extends: raven`, or drop `extends:`",
            )
        info = ProfileInfo(parent, shipped, "shipped")
    if info is None:
        known = ", ".join(sorted(cands))
        raise ProfileError(f"{path}: extends unknown profile {parent!r}", f"known: {known}")
    return info


def format_validation_error(
    path: Path, err: ValidationError, data: Any = None, files: Sequence[Path] = ()
) -> str:
    """One line per bad field, each naming the file (and line, given the files it came from)."""
    from hpctrain.profiles.where import key_text, user_steps

    problems = [(e["loc"], _message(e)) for e in err.errors()]
    # max_nodes is optional in the model and required in files: missing, it is named with the
    # other problems rather than in a second round once they are fixed.
    problems += [(loc, "required field missing") for loc in _unbounded(data, files)]
    lines = []
    for loc, msg in problems:
        steps = user_steps(data, loc)
        lines.append(f"{_place(files, steps) if files else path}: {key_text(steps)}: {msg}")
    return "\n".join(lines)


def _message(e: Any) -> str:
    from hpctrain.profiles.fields import known_fields
    from hpctrain.values.spelling import did_you_mean

    if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        loc = e["loc"]
        return f"unknown field{did_you_mean(str(loc[-1]), known_fields(loc[:-1])) or ' (typo?)'}"
    if e["type"] == "missing_argument":
        return "required field missing"
    return str(e["msg"]).removeprefix("Value error, ")


def _unbounded(data: Any, files: Sequence[Path]) -> list[tuple[str | int, ...]]:
    from hpctrain.profiles.fields import missing_max_nodes

    # Only files must bound their partitions (a run directory's profile may come from code).
    return missing_max_nodes(data) if files else []


def _fix_fields(err: ValidationError, data: Any, files: Sequence[Path]) -> str:
    """The fix of a refused profile: what each missing field holds, and a valid example."""
    from hpctrain.profiles.fields import meaning

    missing = [e["loc"] for e in err.errors() if e["type"] in ("missing", "missing_argument")]
    meanings = dict.fromkeys(m for loc in [*missing, *_unbounded(data, files)]
                             if (m := meaning(loc)) is not None)
    return "; ".join(["fix the fields above", *meanings]) + f" ({_fix_example(files)})"


def _place(files: Sequence[Path], steps: list[Any]) -> str:
    from hpctrain.profiles.where import locate

    place = locate(files, steps)
    return f"{place.path}:{place.line}" if place.line is not None else str(place.path)


def _fix_example(files: Sequence[Path]) -> str:
    # The profile this one extends shows the fields its entries need; raven when none.
    base = files[1].stem if len(files) > 1 else "raven"
    return f"`hpctrain profiles show {base}` shows a valid profile"


def _validate(path: Path, data: dict[str, Any], files: Sequence[Path] = ()) -> Profile:
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(Profile).validate_python(data)
    except ValidationError as e:
        raise ProfileError(
            format_validation_error(path, e, data, files), _fix_fields(e, data, files),
        ) from None


def load_profile_file(path: Path) -> Profile:
    """Load and validate one profile file, following `extends:`."""
    sources = source_key(path, {name: info.path for name, info in _candidates().items()})
    profile = read_by_sources(sources)
    if profile is None:
        read: list[Path] = []
        data = _resolve(path, (path.resolve(),), read)
        # Keyed by the merged content and hpctrain's version: any change is validated again.
        key = cache_key(data)
        profile = read_cached(key)
        if profile is None:
            profile = _validate(path, data, read)
            write_cached(key, profile)
        write_sources(sources, read, key)
    _check_node_bounds(path, profile)
    return profile


def profile_from_text(text: str, where: str) -> Profile:
    """A resolved profile as a run directory keeps it (profile.yaml: no `extends:` left)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ProfileError(f"{where}: not YAML ({e})", "submit the job again") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: not a profile", "submit the job again")
    return _validate(Path(where), data)


def _check_node_bounds(path: Path, profile: Profile) -> None:
    # Without a bound any --nodes passes the plan, 10**20 included; the model leaves it
    # optional only for profiles built in code (the dev cluster's tests).
    unbounded = [(i, p.name) for i, p in enumerate(profile.partitions) if p.max_nodes is None]
    if not unbounded:
        return
    from hpctrain.profiles.where import key_text, user_steps

    # The error path only: merged again for the files and names the cache skipped.
    read: list[Path] = []
    data = _resolve(path, (path.resolve(),), read)
    lines = []
    for i, name in unbounded:
        steps = user_steps(data, ("partitions", i, "max_nodes"))
        lines.append(f"{_place(read, steps)}: {key_text(steps)}: required field missing "
                     f"(partition {name})")
    raise ProfileError(
        "\n".join(lines),
        "give every partition the most nodes one job may use, e.g. `max_nodes: 4` "
        "(the partition's node count when the site publishes no limit)",
    )


def load_profile(name_or_path: str) -> Profile:
    """Load a profile by name (user first, then shipped) or by file path."""
    return load_profile_file(profile_path(name_or_path))


def profile_path(name_or_path: str) -> Path:
    """The file of a profile given by name (user first, then shipped) or by path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        if not p.exists():
            raise ProfileError(f"profile file {name_or_path} not found", "check the path")
        return p
    cands = _candidates()
    info = cands.get(name_or_path)
    if info is None:
        raise _unknown_profile(name_or_path, sorted(cands))
    return info.path


def _unknown_profile(name: str, known: list[str]) -> ProfileError:
    listed = ", ".join(known)
    if name.startswith("-"):
        # `-P -N 2`: the option took the next option as its value.
        return ProfileError(
            f"no profile name given: {name!r} looks like an option, not a profile",
            f"put the name right after --profile/-P, e.g. `-P {known[0] if known else 'NAME'}`;"
            f" profiles: {listed}",
        )
    from hpctrain.values.spelling import did_you_mean

    return ProfileError(
        f"unknown profile {name!r}{did_you_mean(name, known)}",
        f"choose one of: {listed}; or add {paths.user_profiles_dir()}/{name}.yaml",
    )

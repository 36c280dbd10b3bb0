"""Where a field of a merged profile was written: the user's file, line and key.

Validation sees the profile after `extends:` merged it into its base, so an error's location
counts entries of the merged lists (`partitions.5.node_types.3`), which is in no file. Named
entries (partitions, node types) are named as the user wrote them (`partitions[name=a100]`),
and the location points at the file of the chain that wrote the most of that key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A step into a profile: a mapping key, a list index, or a named list's entry by its name.
Step = str | int | tuple[str, str]


@dataclass(frozen=True)
class Place:
    """Where in a profile's files a key is set: the file and line."""

    path: Path
    line: int | None  # 1-based; None where no file of the chain holds any of the key
    key: str


def user_steps(merged: Any, loc: Sequence[str | int]) -> list[Step]:
    """The merged data's location `loc`, list entries that have a name named by it."""
    steps: list[Step] = []
    node = merged
    for part in loc:
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            item = node[part]
            name = item.get("name") if isinstance(item, dict) else None
            steps.append(("name", name) if isinstance(name, str) else part)
            node = item
        else:
            steps.append(part if isinstance(part, int) else str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return steps


def key_text(steps: Sequence[Step]) -> str:
    """`partitions[name=a100].node_types[0].gpus`; `(top level)` for no steps."""
    out = ""
    for step in steps:
        if isinstance(step, tuple):
            out += f"[name={step[1]}]"
        elif isinstance(step, int):
            out += f"[{step}]"
        else:
            out += f".{step}" if out else step
    return out or "(top level)"


def locate(files: Sequence[Path], steps: Sequence[Step]) -> Place:
    """The file of `files` (the user's first, then its bases) that holds most of `steps`."""
    key = key_text(steps)
    best: tuple[int, Path, int | None] = (-1, files[0], None)
    for path in files:
        root = _compose(path)
        if root is None:
            continue
        depth, line = _walk(root, steps)
        # Ties go to the file nearer the user: the key is theirs where they wrote it too.
        if depth > best[0]:
            best = (depth, path, line)
    return Place(best[1], best[2], key)


def _compose(path: Path) -> Any:
    from hpctrain.files import yamlread

    try:
        return yamlread.compose(yamlread.read_text(path))
    except Exception:  # noqa: BLE001 - an unreadable base only loses a line number
        return None


def _walk(node: Any, steps: Sequence[Step]) -> tuple[int, int | None]:
    """How many steps the YAML node tree holds, and the line of the deepest one."""
    line = node.start_mark.line + 1
    for depth, step in enumerate(steps):
        found = _child(node, step)
        if found is None:
            return depth, line
        line, node = found
    return len(steps), line


def _child(node: Any, step: Step) -> tuple[int, Any] | None:
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == step:
                return k.start_mark.line + 1, v
    elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
        if 0 <= step < len(node.value):
            item = node.value[step]
            return item.start_mark.line + 1, item
    elif isinstance(node, yaml.SequenceNode) and isinstance(step, tuple):
        for item in node.value:
            if _name_of(item) == step[1]:
                return item.start_mark.line + 1, item
    return None


def _name_of(node: Any) -> str | None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == "name" and isinstance(v, yaml.ScalarNode):
                return str(v.value)
    return None

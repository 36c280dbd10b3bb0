"""SLURM's host lists (`node[1-3,05],gpu7`) as node names. Pure."""

from __future__ import annotations


def expand_nodes(node_list: str | None) -> list[str]:
    """`node[1-3,5],gpu7` as node names (SLURM's host list, one level of brackets)."""
    out: list[str] = []
    for part in _split_top(node_list or ""):
        prefix, _, rest = part.partition("[")
        if not rest:
            out.append(prefix)
            continue
        for item in rest.rstrip("]").split(","):
            low, _, high = item.partition("-")
            if not high:
                out.append(prefix + low)
                continue
            width = len(low)
            out.extend(f"{prefix}{i:0{width}d}" for i in range(int(low), int(high) + 1))
    return [n for n in out if n]


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur] if cur else parts

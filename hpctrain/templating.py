"""The one way hpctrain sets up Jinja: strict, no HTML escaping, whitespace as written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2


def environment(directory: Path, filters: Mapping[str, Callable[..., Any]],
                globals_: Mapping[str, Any] | None = None) -> jinja2.Environment:
    """A Jinja environment over `directory`; an undefined name is an error, not ''."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        # Shell scripts and config files, not HTML: values are quoted by the filters instead.
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(filters)
    env.globals.update(globals_ or {})
    return env

"""Output helpers: rich for people, plain JSON for scripts, diagnostics on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def is_tty() -> bool:
    return sys.stdout.isatty()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")

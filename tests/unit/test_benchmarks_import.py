"""The benchmarks name hpctrain's parts as they are now: a benchmark is run by hand, rarely,
and one that names a function since moved fails only then (startup_baseline.py did)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_what_a_benchmark_imports_from_hpctrain_exists(script: Path) -> None:
    missing = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "hpctrain" or node.module.startswith("hpctrain.")):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("hpctrain."):
                    importlib.import_module(alias.name)
    assert not missing, f"{script.name} imports what hpctrain no longer has: {missing}"


def test_there_are_benchmarks() -> None:
    assert len(BENCHMARKS) > 10

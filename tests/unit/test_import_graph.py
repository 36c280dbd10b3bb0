"""No import cycle between hpctrain's modules, counting the imports under TYPE_CHECKING and
those inside functions (import-linter's acyclic_siblings sees siblings only)."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def import_cycles(package: str) -> list[tuple[str, ...]]:
    """The shortest cycle through each module that is in one, each set of modules once."""
    graph = grimp.build_graph(package, include_external_packages=False,
                              exclude_type_checking_imports=False, cache_dir=None)
    cycles: dict[frozenset[str], tuple[str, ...]] = {}
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module) - {module}):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.setdefault(frozenset(chain), (module, *chain))
    return list(cycles.values())


def test_no_import_cycle_between_modules() -> None:
    cycles = import_cycles("hpctrain")
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_through_type_checking_and_a_function_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "plantedcycle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from plantedcycle import b\n"
    )
    (package / "b.py").write_text("def f():\n    from plantedcycle import a\n")
    (package / "c.py").write_text("from plantedcycle import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("plantedcycle") == [("plantedcycle.a", "plantedcycle.b", "plantedcycle.a")]


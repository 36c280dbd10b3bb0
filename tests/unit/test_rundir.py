"""The run directory has one definition (hpctrain/values/rundir.py): no module spells its names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hpctrain.values import rundir

REPO = Path(__file__).resolve().parents[2]
NAMES = rundir.for_template()
# Plain words are names only where they stand in a path; the rest are distinctive anywhere.
WORDS = {n for n in NAMES.values() if re.fullmatch(r"[a-z]+", n)}


def _spelled(text: str, name: str) -> bool:
    if name in WORDS:
        return re.search(rf"/{re.escape(name)}(?=[/\"'.\s]|$)", text) is not None
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants: prose about the files, not code that opens them."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings, f-string parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip]


def copies_in_modules(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "rundir.py" or "_compiled" in path.parts:
            continue
        for line, text in _strings(path):
            found += [f"{path.relative_to(package.parent)}:{line}: {name!r}"
                      for name in NAMES.values() if _spelled(text, name)]
    return found


def copies_in_templates(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.j2")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(folder.parent)}:{i}: {name!r}"
                      for name in NAMES.values() if _spelled(line, name)]
    return found


def test_no_module_spells_a_run_file_name() -> None:
    assert copies_in_modules(REPO / "hpctrain") == []


def test_the_template_takes_the_names_from_rundir() -> None:
    assert copies_in_templates(REPO / "templates") == []
    text = (REPO / "templates" / "sbatch.sh.j2").read_text(encoding="utf-8")
    for key in ("race_claim", "alternatives", "stop_requested", "stop_saved",
                "training_complete"):
        assert f"{{{{ run_files.{key} }}}}" in text


def test_the_check_finds_a_copy(tmp_path: Path) -> None:
    # The scan itself must be able to fail: a module and a template with copies in them.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        'A = "metrics.json"\nB = f"{d}/monitor/{n}.jsonl"\nC = "monitor"\n')
    (tmp_path / "t.j2").write_text('rm -f "$HPCTRAIN_RUN_DIR/stop-saved"\n')
    assert copies_in_modules(tmp_path / "pkg") == ["pkg/m.py:1: 'metrics.json'",
                                                   "pkg/m.py:2: 'monitor'"]
    assert copies_in_templates(tmp_path) == [f"{tmp_path.name}/t.j2:1: 'stop-saved'"]


def test_names_are_unique_plain_file_names() -> None:
    values = list(NAMES.values())
    assert len(values) == len(set(values))
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9._-]*", v) for v in values)

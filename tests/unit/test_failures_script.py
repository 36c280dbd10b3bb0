"""scripts/failures.py lists again, at a run's end, each test that failed in any stage: CI keeps
only the last lines of a run, and an early stage's failure scrolls far above them (stop 46's CI
said only "local: exit 1"). Read from the JUnit file a real pytest writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASES = '''
import pytest

def test_passes():
    assert True

def test_fails():
    assert 1 + 1 == 3, "arithmetic moved"

@pytest.fixture
def broken():
    raise RuntimeError("fixture down")

def test_errs(broken):
    pass
'''


def test_each_failure_and_error_is_listed_with_its_stage(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    xml = tmp_path / "local.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--junitxml={xml}", str(tmp_path / "test_cases.py")],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    assert run.returncode == 1, run.stdout
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "failures.py"), str(xml)],
                         capture_output=True, text=True, check=True).stdout
    assert "2 failed test(s)" in out
    assert "[local] FAILED test_cases::test_fails" in out and "arithmetic moved" in out
    assert "[local] FAILED test_cases::test_errs" in out and "fixture down" in out
    assert "test_passes" not in out


def test_a_clean_run_prints_nothing_and_an_unreadable_file_is_named(tmp_path: Path) -> None:
    good = tmp_path / "quiet.xml"
    good.write_text('<testsuites><testsuite><testcase classname="m" name="t"/></testsuite>'
                    '</testsuites>')
    script = [sys.executable, str(ROOT / "scripts" / "failures.py")]
    assert subprocess.run([*script, str(good)], capture_output=True, text=True,
                          check=True).stdout == ""
    cut = tmp_path / "lane.xml"
    cut.write_text("<testsuites><testsuite>")
    out = subprocess.run([*script, str(cut)], capture_output=True, text=True, check=True).stdout
    assert "[lane] FAILED lane.xml" in out and "unreadable JUnit file" in out

"""A rank whose steps take milliseconds and that then hangs leaves its last step in its record,
not the first one the once-a-second throttle wrote (issue 51: a stall report showed "last
reported step 0" for ranks 1,800 steps in)."""

from __future__ import annotations

import json
from pathlib import Path

from hpctrain import progress
from hpctrain.values.rundir import RunDir
from tests.waits import wait_for


def test_the_last_step_is_written_after_the_throttle(tmp_path: Path) -> None:
    reporter = progress.Reporter(RunDir(tmp_path).progress_dir, "nodeA", 0)
    for step in range(1800):
        reporter.report(step)
    record = RunDir(tmp_path).progress_dir / "nodeA-0.json"

    def last_step() -> bool:
        return bool(json.loads(record.read_text())["step"] == 1799)

    wait_for(last_step, 5, "the pending report written")


def test_an_older_pending_report_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    reporter = progress.Reporter(RunDir(tmp_path).progress_dir, "nodeA", 0)
    reporter.report(1, now=100.0)
    reporter.report(2, now=100.5)  # pending
    reporter.report(3, now=101.5)  # written at once
    reporter._write(2, 100.5)  # the flusher, late
    record = json.loads((RunDir(tmp_path).progress_dir / "nodeA-0.json").read_text())
    assert (record["step"], record["t"]) == (3, 101.5)

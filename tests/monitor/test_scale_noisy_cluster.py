"""A scaling study on a busy dev cluster: the disturbed topology is marked noisy and the
efficiency it inflates is flagged implausible, never reported as a result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

# quiet: its hogs would slow the other lanes' jobs, and their load would blur its own.
pytestmark = [
    pytest.mark.cluster, pytest.mark.slow, pytest.mark.quiet,
    # Load is this test's variable: it loads the 1x1 runs alone and expects 1x2 to look better
    # than ideal. scripts/test-under-load.sh loads every run (1x2 came out at 1.086, not over
    # 1.1), so there the premise is gone and the test says so instead of failing.
    pytest.mark.skipif(os.environ.get("HPCTRAIN_TEST_UNDER_LOAD") == "1",
                       reason="needs a machine loaded only by its own hogs"),
]
# About 0.2 s of training per quiet 1x1 epoch (one thread, 400,000 samples) on this machine,
# twice that or more beside the hogs: long next to the hogs' switching (a poll every 20 ms),
# short enough for four runs in a minute.
EPOCHS = 6
STUDY = ("--task", "spiral", "--max-epochs", str(EPOCHS), "--set", "data.samples=400000",
         "--time", "5")
# Busy loops on every core of this machine (the dev cluster's nodes are processes on it).
# Three a core: the base run's loaded epochs then run at about a quarter of their speed, so
# that some load the 1x2 run meets besides (a fresh-clone run's 1x2 came out at 1.085 with two
# a core) cannot hide what the hogs did to its base.
HOGS = 3 * (os.cpu_count() or 2)
# Epochs 2-5 of each 1x1 run train beside the hogs and 6 without: 8 of the 2 x 5 post-warm-up
# epochs are disturbed, so the median is a disturbed one even where the hogs came late to one
# epoch (with epochs 2-4, 6 of 10, one weakly loaded epoch put an undisturbed one in the median:
# efficiency 0.971 in a fresh-clone run), and the undisturbed ones make the spread.
LOADED_UNTIL = 5


def _loaded(runs: Path) -> bool:
    """A 1x1 run is training (its metrics.json says `running`) and is before LOADED_UNTIL."""
    for metrics in runs.glob("scale-1x1-*/metrics.json"):
        try:
            data = json.loads(metrics.read_text())
        except ValueError:  # being replaced: the next poll reads it whole
            continue
        if data.get("status") == "running" and data.get("epochs_completed", 0) < LOADED_UNTIL:
            return True
    return False


@contextmanager
def hogs_during_1x1(runs: Path) -> Iterator[list[bool]]:
    """CPU hogs, stopped (SIGSTOP) except while a 1x1 run trains its epochs 2..LOADED_UNTIL;
    yields a flag list that holds True once they ran."""
    # Each hog in a session of its own, as another user's job would be: the kernel shares the
    # CPU between sessions first (autogroups), so hogs in one session would leave a one-thread
    # rank its whole core whatever their number.
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(HOGS)]
    done, ran, on = threading.Event(), [False], True

    def switch() -> None:
        nonlocal on
        while not done.wait(0.02):
            want = _loaded(runs)
            if want != on:
                for p in procs:
                    p.send_signal(signal.SIGCONT if want else signal.SIGSTOP)
                on, ran[0] = want, ran[0] or want

    for p in procs:
        p.send_signal(signal.SIGSTOP)
    on = False
    thread = threading.Thread(target=switch, daemon=True)
    thread.start()
    try:
        yield ran
    finally:
        done.set()
        thread.join()
        for p in procs:
            p.kill()
            p.send_signal(signal.SIGCONT)
            p.wait()


def hpctrain(dc: DevClusterHandle, cwd: Path, *args: str, timeout_s: float = 120
             ) -> subprocess.CompletedProcess[str]:
    # The session's one thread a rank: the 1x2 run's two ranks then fit the two cores.
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=dc.env(),
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def _metrics(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads((Path(r["run_dir"]) / "metrics.json").read_text())
            for r in row["repeats"]]


def test_a_loaded_base_run_is_noisy_and_its_efficiency_flagged(
    devcluster: DevClusterHandle, tmp_path: Path,
) -> None:
    name = f"noisy study {os.urandom(3).hex()}"
    with hogs_during_1x1(tmp_path / "hpctrain-runs") as ran:
        res = hpctrain(devcluster, tmp_path, "scale", "--profile", "local", "--topologies",
                       "1x1,1x2", *STUDY, "--repeats", "2", "--target", "val_acc=0.6",
                       "--name", name, "--wait", "--wait-timeout", "400", "--json",
                       timeout_s=450)
    assert res.returncode == 0, res.stderr
    assert ran[0], "the hogs never ran: no 1x1 run was seen training"
    data = json.loads(res.stdout)
    rows = {r["topology"]: r for r in data["runs"]}
    assert list(rows) == ["1x1", "1x2"] and data["pending"] == [], res.stderr
    assert all(r["state"] == "COMPLETED" for r in rows.values()), res.stderr
    assert [p["repeat"] for p in rows["1x1"]["repeats"]] == [1, 2]
    base, two = rows["1x1"], rows["1x2"]
    assert base["epochs_measured"] == 2 * (EPOCHS - 1)
    # The disturbed topology: marked noisy, with its numbers.
    low, high = base["samples_per_s_range"]
    assert base["noisy"] and base["rate_ratio"] > 1.5 and high / low > 1.5, base
    # Its median is a loaded epoch's: 1x2 looks better than ideal, and that is flagged.
    assert two["efficiency"] > 1.1, (base, two)
    assert two["implausible"].startswith("load on the node: the base run 1x1 was noisy")
    # Time to the target: from each run's own records, within the run's time.
    assert data["target"] == "val_acc>=0.6" and two["target_reached"] == 2
    for m, rep in zip(_metrics(two), two["repeats"], strict=True):
        assert m["startup_s"] < rep["time_to_target_s"] <= m["startup_s"] + m["wall_time_s"] + 1
    text = hpctrain(devcluster, tmp_path, "scale-report", name)
    assert text.returncode == 0, text.stderr
    assert "NOISY x" in text.stdout and "IMPLAUSIBLE" in text.stdout
    assert "1x1 is noisy" in text.stdout and "likely cause: load on the node" in text.stdout
    assert Path(data["plot"]).read_bytes()[:4] == b"\x89PNG"

"""`hpctrain sweep --login`: the arrays queued at a login (loopback sshd) over the ssh master,
every point's run directory made there in one upload, the sweep followed and reported from the
laptop, which has no SLURM of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for


def test_sweep_through_a_login(devcluster: DevClusterHandle, sshd: Sshd,
                               laptop: Callable[..., Laptop]) -> None:
    lap = laptop(str(sshd.remote_home / "sweep proj"))
    lap.ok("login", "remote")
    done = json.loads(lap.ok(
        "sweep", "--profile", "remote", "--login", "testlogin", "--time", "2", "--no-monitor",
        "--grid", "k=a b,$(touch x);y,-n", "--name", "remote-sweep", "--json",
        "--", "sh", "-c", 'printf "%s\\n" "$1" > "$HPCTRAIN_RUN_DIR/got"', "point").stdout)
    run_dir = Path(done["run_dir"])
    assert str(run_dir).startswith(str(sshd.remote_home))

    def row() -> dict[str, object]:
        jobs = json.loads(lap.ok("status", "--json").stdout)["jobs"]
        (found,) = [j for j in jobs if str(j["name"]).startswith("sweep remote-sweep [")]
        return dict(found)

    ended = wait_for(row, 180, "the sweep's 3 points to end", until=lambda r: r["terminal"],
                     poll_s=2)
    assert "3/3 done" in str(ended["name"]), ended
    # Each value arrived whole and inert, as the point's own argument.
    got = [(run_dir / "points" / f"{n:03d}" / "got").read_text() for n in range(3)]
    assert got == ["k=a b\n", "k=$(touch x);y\n", "k=-n\n"]
    assert not (run_dir / "points" / "001" / "x").exists()
    points = json.loads(lap.ok("status", "--study", "remote-sweep", "--json").stdout)["jobs"]
    assert [p["state"] for p in points] == ["COMPLETED"] * 3
    before = len(sshd.commands())
    report = json.loads(lap.ok("sweep-report", "remote-sweep", "--json").stdout)
    # The points ended and were judged by the status above: one round trip reads every
    # point's metrics (a tar of them), whatever the count.
    assert len(sshd.commands()) == before + 1, sshd.commands()[before:]
    assert [p["settings"] for p in report["points"]] == [
        {"k": "a b"}, {"k": "$(touch x);y"}, {"k": "-n"}]
    assert report["metric"] is None and report["plot"] is None

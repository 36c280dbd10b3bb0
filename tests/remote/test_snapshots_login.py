"""Code snapshots through a login (loopback sshd): two submits from two states of the laptop's
work tree, held until both are queued, each run its own code, although the login's synced
copy holds only the second state."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for

MARK = ("import os, pathlib\n"
        "with open(pathlib.Path(os.environ['HPCTRAIN_RUN_DIR']) / 'markers', 'a') as f:\n"
        "    f.write({version!r} + '\\n')\n")


# Both edits dated within one second (as a quick edit and resubmit are): the same size and the
# same whole second, which rsync's default comparison took for "unchanged".
SECOND = 1_800_000_000


def _edit(lap: Laptop, version: str, fraction_ns: int) -> None:
    (lap.project / "pkg").mkdir(exist_ok=True)
    path = lap.project / "pkg" / "mark.py"
    path.write_text(MARK.format(version=version))
    stamp = SECOND * 1_000_000_000 + fraction_ns
    os.utime(path, ns=(stamp, stamp))


def _submit(lap: Laptop) -> dict[str, object]:
    res = lap.ok("submit", "--profile", "remote", "--time", "2", "--json",
                 "--sbatch-arg=--hold", "--", "python3", "-m", "pkg.mark")
    return dict(json.loads(res.stdout))


def _marker(run_dir: object, lines: int = 1) -> str:
    path = Path(str(run_dir)) / "markers"
    return wait_for(lambda: path.read_text() if path.exists() else "", 120,
                    f"{lines} marker line(s) in {path}",
                    until=lambda t: t.count("\n") >= lines, poll_s=0.5).strip()


def test_two_submits_through_a_login_each_run_their_own_code(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
) -> None:
    workdir = sshd.remote_home / "snap proj"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    _edit(lap, "v1", 100_000_000)
    first = _submit(lap)
    _edit(lap, "v2", 900_000_000)
    second = _submit(lap)
    snap1, snap2 = first["snapshot"], second["snapshot"]
    assert isinstance(snap1, dict) and isinstance(snap2, dict)
    assert snap1["source"] == snap2["source"] == "list" and snap1["id"] != snap2["id"]
    # Only the edited file is new in the login's store; the ignored data never went there.
    assert snap2["added_files"] == 1 and not (workdir / "data").exists()
    assert (workdir / "pkg" / "mark.py").read_text() == MARK.format(version="v2")
    devcluster.client().release([str(first["job_id"]), str(second["job_id"])])
    assert _marker(first["run_dir"]) == "v1"
    assert _marker(second["run_dir"]) == "v2"
    code = Path(str(first["run_dir"])) / "code"
    assert (code / "pkg" / "mark.py").read_text() == MARK.format(version="v1")
    # A rerun's dry run reads the job's request and profile over the connection, makes
    # nothing: its script is the job's own but for the run directory.
    dry = json.loads(lap.ok("rerun", str(first["job_id"]), "--dry-run", "--json").stdout)
    old_script = (Path(str(first["run_dir"])) / "job.sbatch").read_text()
    assert dry["script_text"] == old_script.replace(Path(str(first["run_dir"])).name,
                                                    Path(str(dry["run_dir"])).name)
    assert not Path(str(dry["run_dir"])).exists()
    # A rerun of the first job, on the login, runs v1 again (its snapshot, linked there).
    again = json.loads(lap.ok("rerun", str(first["job_id"]), "--json").stdout)
    assert str(again["run_dir"]).startswith(str(workdir)) and again["rerun_of"] == str(
        first["job_id"])
    # Planned again on two nodes, there: the request and profile read over the connection.
    wider = json.loads(lap.ok("rerun", str(first["job_id"]), "--nodes", "2", "--json").stdout)
    devcluster.client().release([str(again["job_id"]), str(wider["job_id"])])
    assert _marker(again["run_dir"]) == "v1"
    script = (Path(str(wider["run_dir"])) / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2\n" in script
    ranks = 2 * int(script.split("#SBATCH --ntasks-per-node=")[1].split()[0])
    assert _marker(wider["run_dir"], ranks).splitlines() == ["v1"] * ranks  # a line per rank
    # gc on the login keeps both snapshots: every recorded job still names one.
    cleaned = json.loads(lap.ok("gc", "--min-age", "0", "--json").stdout)["stores"]
    (there,) = [c for c in cleaned if c["login"] == "testlogin"]
    assert there["snapshots"] == [] and there["kept"] == 2
    assert there["store"] == str(workdir / "hpctrain-runs" / ".snapshots")

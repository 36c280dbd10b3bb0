"""Submit on this machine refuses a container image that is not there, before sbatch (issue
56, docs/containers.md): the message names the path, nothing is queued, written or recorded.
A relative image is the project's: it is found, and the script holds its absolute path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import DevClusterHandle

# A quote, spaces, $(), backticks, ; and a leading - in its name.
HOSTILE = "-rf it's $(touch pwned) `touch pwned`; touch pwned \"x\" .sif"
NAME = "image-check-local"


def _hpctrain(devcluster: DevClusterHandle, project: Path, *args: str
              ) -> subprocess.CompletedProcess[str]:
    """hpctrain in `project` against the dev cluster, with a history of the test's own."""
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=project,
                          env=devcluster.env(HPCTRAIN_HOME=str(project.parent / "home")),
                          capture_output=True, text=True, timeout=120, check=False)


def _accounted(devcluster: DevClusterHandle) -> list[str]:
    out = devcluster.client().run(["sacct", "-X", "-n", "-P", "--name", NAME, "-S", "now-1days",
                                   "--format=JobID"], check=False).stdout
    return out.split()


def test_a_missing_image_is_refused_before_sbatch(devcluster: DevClusterHandle,
                                                  tmp_path: Path) -> None:
    project = tmp_path / "my project"
    project.mkdir()
    queued = _accounted(devcluster)
    missing = tmp_path / "images" / HOSTILE
    # One job, a race, a sweep: each kind's scripts list their images for the check.
    for kind in ((), ("--first-of", "1x1,2x1"), ("--grid", "optim.lr=0.1,0.03")):
        command = "sweep" if "--grid" in kind else "submit"
        res = _hpctrain(devcluster, project, command, "--profile", "local", "--job-name", NAME,
                        "--container", str(missing), *kind, *(() if kind else ("--", "true")))
        assert res.returncode == 1, res.stdout
        assert f"Error: container image {missing} does not exist here: " in res.stderr, kind
        assert "Fix: check the --container path" in res.stderr and "Traceback" not in res.stderr
        assert list(project.iterdir()) == [], "no run directory, no runs folder"
    assert _accounted(devcluster) == queued, "nothing queued"
    status = _hpctrain(devcluster, project, "status", "--json")
    assert json.loads(status.stdout)["jobs"] == [], status.stderr
    # The dry run shows the script without asking (the image may be made before the submit).
    dry = _hpctrain(devcluster, project, "submit", "--profile", "local", "--container",
                    str(missing), "--dry-run", "--", "true")
    assert dry.returncode == 0, dry.stderr
    assert not list(tmp_path.rglob("pwned"))


def test_a_relative_image_is_the_projects_and_goes_on(devcluster: DevClusterHandle,
                                                       tmp_path: Path) -> None:
    project = tmp_path / "my project"
    (project / "images").mkdir(parents=True)
    (project / "images" / HOSTILE).write_text("")
    res = _hpctrain(devcluster, project, "submit", "--profile", "local", "--job-name", NAME,
                    "--container", f"images/{HOSTILE}", "--sbatch-arg=--hold", "--json", "--",
                    "true")
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout)
    try:
        image = str(project / "images" / HOSTILE)
        assert done["plan"]["container"]["image"] == image
        script = Path(done["script"]).read_text()
        assert "'/" in script and "images/-rf it'\"'\"'s $(touch pwned)" in script
    finally:
        _hpctrain(devcluster, project, "cancel", str(done["job_id"]))
    assert not list(tmp_path.rglob("pwned"))

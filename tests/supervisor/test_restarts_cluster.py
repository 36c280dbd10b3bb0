"""In-job restarts on the dev cluster (issue 54): a rank SIGKILLed at a seeded step of a 2-node
x 2-rank packaged training recovers inside the same job, with every epoch recorded once and the
final metrics of a run that was never killed; the same under torchrun.

Three of benchmarks/inalloc_recovery.py's trials, run as it runs them (its 20 and the time to
the next step are the benchmark's; no timing is asserted here).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hpctrain.values.attempts import RESTART, parse_attempts
from hpctrain.values.rundir import RunDir
from tests.conftest import DevClusterHandle
from tests.jobs.helpers import cluster_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "inalloc_recovery.py"


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inalloc_recovery", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bench(devcluster: DevClusterHandle, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for key, value in cluster_env(devcluster.slurm_conf, tmp_path / "home").items():
        monkeypatch.setenv(key, value)
    return _benchmark()


def test_three_seeded_kills_recover_inside_the_job(bench: ModuleType, tmp_path: Path) -> None:
    cwd = bench.project(tmp_path / "work")
    reference = bench.reference_run(cwd)
    for seed in range(3):
        t = bench.trial(cwd, seed, reference)
        assert (t.state, t.same_job, t.attempts, t.epochs_once, t.metrics_equal) == (
            "COMPLETED", True, 2, True, True), t
        assert t.kill_to_next_step_s is not None, t


def test_torchrun_starts_every_node_again(bench: ModuleType, tmp_path: Path) -> None:
    """Every node's torchrun restarts on a fresh endpoint (torchrun's own --max-restarts left
    the other node's workers unreachable: pytorch issue 167288)."""
    cwd = bench.project(tmp_path / "work")
    job = bench.submit(cwd, "--launcher", "torchrun")
    run_dir, job_id = Path(job["run_dir"]), str(job["job_id"])
    killed_at, old = bench.kill_at(run_dir, 40, 1)
    assert bench.next_step_after(run_dir, killed_at, old) is not None
    assert bench.wait_end(job_id)["state"].startswith("COMPLETED")
    first, second = parse_attempts(RunDir(run_dir).attempts.read_text())
    assert first.then == RESTART and first.port != second.port, (first, second)
    recorded = json.loads(RunDir(run_dir).metrics.read_text())
    assert [e["epoch"] for e in recorded["epochs"]] == list(range(1, bench.EPOCHS + 1))
    # The trainer's own record of its starts: the second is the job's attempt 1.
    assert [(r["slurm_job_id"], r["attempt"]) for r in recorded["restarts"]] == [
        (job_id, 0), (job_id, 1)]


RESUMABLE = Path(__file__).resolve().parents[2] / "examples" / "restarts" / "resumable.py"


def test_a_script_of_ones_own_goes_on_from_its_own_checkpoint(bench: ModuleType,
                                                               tmp_path: Path) -> None:
    """--restarts 1 for a command of one's own: a killed rank's job starts the script again,
    which reads the checkpoint it wrote in the run directory (the example in the docs)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    done = subprocess.run([*bench.HPCTRAIN, "submit", "--profile", "local", "--nodes", "2",
                           "--gpus-per-node", "1", "--restarts", "1", "--time", "5", "--json",
                           "--", "python", str(RESUMABLE), "--steps", "200"],
                          cwd=cwd, capture_output=True, text=True, check=True)
    job = json.loads(done.stdout)
    run_dir, job_id = Path(job["run_dir"]), str(job["job_id"])
    # After its first checkpoint (step 19), so that the restart has one to read.
    killed_at, old = bench.kill_at(run_dir, 60, 1)
    assert bench.next_step_after(run_dir, killed_at, old) is not None
    assert bench.wait_end(job_id)["state"].startswith("COMPLETED")
    out = next(run_dir.glob(f"*-{job_id}.out")).read_text()
    assert "attempt 0: starting at step 0" in out, out
    resumed = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines()
               if line.startswith("attempt 1: starting at step ")]
    assert resumed and resumed[0] >= 20, out
    assert "done: 200 steps" in out

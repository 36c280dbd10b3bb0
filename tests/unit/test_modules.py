"""Module loads in rendered scripts: skipped on the dev cluster, loud failures elsewhere."""

import os
import stat
import subprocess
from pathlib import Path

from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script


def _script(tmp_path: Path) -> Path:
    plan = build_plan(JobRequest(profile=load_profile("raven"), command=("true",)))
    path = tmp_path / "job.sh"
    path.write_text(render_script(plan))
    return path


def _run(tmp_path: Path, cluster: str, module_body: str | None) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in {"srun": 'shift; exec "$@"', "scontrol": "echo node1"}.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755 | stat.S_IEXEC)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_CLUSTER_NAME": cluster,
        "HOME": str(tmp_path),
    }
    if module_body is not None:
        # An exported shell function, as Lmod's init provides `module`.
        env["BASH_FUNC_module%%"] = f"() {{ {module_body}; }}"
    return subprocess.run(
        ["bash", str(_script(tmp_path))], cwd=tmp_path, env=env, capture_output=True, text=True
    )


def test_dev_cluster_skips_modules(tmp_path: Path) -> None:
    r = _run(tmp_path, "hpctrain-dev", None)
    assert r.returncode == 0, r.stderr
    assert "skipping: gcc/13 cuda/12.6" in r.stderr


def test_real_cluster_without_module_system_fails_loudly(tmp_path: Path) -> None:
    r = _run(tmp_path, "raven", None)
    assert r.returncode == 1
    assert "'module' is not available" in r.stderr and "gcc/13 cuda/12.6" in r.stderr


def test_failing_module_load_stops_the_job(tmp_path: Path) -> None:
    r = _run(tmp_path, "raven", 'if [ "$2" = cuda/12.6 ]; then return 1; fi')
    assert r.returncode == 1
    assert "hpctrain: module load failed: cuda/12.6" in r.stderr


def test_working_modules_load_and_job_runs(tmp_path: Path) -> None:
    log = tmp_path / "modules.log"
    r = _run(tmp_path, "raven", f'echo "$@" >> {log}')
    assert r.returncode == 0, r.stderr
    assert log.read_text().splitlines() == ["load gcc/13", "load cuda/12.6"]
    assert os.path.isdir(tmp_path / "hpctrain-runs" / "hpctrain-7")

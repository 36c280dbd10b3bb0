"""The threads each rank starts with: a rendered script run under bash, as a node would run it."""

import dataclasses
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script

SHOW = 'echo "threads: $OMP_NUM_THREADS $MKL_NUM_THREADS $OPENBLAS_NUM_THREADS"'
# torchrun's rule (torch/distributed/run.py): OMP_NUM_THREADS=1 for its workers only where it
# is unset and more than one worker runs; then the command after --no-python, once is enough.
TORCHRUN = """
for arg; do
  case "$arg" in --nproc-per-node=*) nproc="${arg#*=}" ;; esac
done
if [ -z "${OMP_NUM_THREADS+set}" ] && [ "$nproc" -gt 1 ]; then export OMP_NUM_THREADS=1; fi
while [ "$1" != --no-python ]; do shift; done
shift
exec "$@"
"""


def _stubs(bin_dir: Path) -> None:
    bin_dir.mkdir()
    stubs = {
        # The step runs here, in srun's place: its options dropped, the environment inherited.
        "srun": 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"',
        "scontrol": "echo node1",
        "torchrun": TORCHRUN,
        # The CPUs the node shows this process (GNU nproc); plenty unless a test says.
        "nproc": 'echo "${NODE_CPUS_SHOWN:-64}"',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755 | stat.S_IEXEC)


def _threads(tmp_path: Path, slurm_cpus: str | None, environ: dict[str, str],
             setup: tuple[str, ...] = (), **req: Any) -> str:
    """OMP, MKL and OpenBLAS threads as the job's program sees them."""
    profile = load_profile("local")
    profile = dataclasses.replace(
        profile, environment=dataclasses.replace(profile.environment, setup=list(setup)))
    plan = build_plan(JobRequest(profile=profile, command=("sh", "-c", SHOW),
                                 monitor_interval_s=None, **req))
    script = tmp_path / "job.sh"
    script.write_text(render_script(plan))
    _stubs(tmp_path / "bin")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node1", "SLURM_JOB_NUM_NODES": "1",
           **environ}
    if slurm_cpus is not None:
        env["SLURM_CPUS_PER_TASK"] = slurm_cpus
    ran = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    [line] = [x for x in ran.stdout.splitlines() if x.startswith("threads: ")]
    return line.removeprefix("threads: ")


@pytest.mark.parametrize(("slurm_cpus", "environ", "expect"), [
    ("3", {}, "3 3 3"),                                # SLURM's value, not the plan's 2
    (None, {}, "2 2 2"),                               # outside SLURM: the plan's
    ("3", {"OMP_NUM_THREADS": "1"}, "1 1 1"),          # the submitting shell's wins, for all
    ("3", {"MKL_NUM_THREADS": "5"}, "3 5 3"),
    ("3", {"OPENBLAS_NUM_THREADS": "4"}, "3 3 4"),
])
def test_each_srun_rank_gets_its_cpus(slurm_cpus: str | None, environ: dict[str, str],
                                      expect: str, tmp_path: Path) -> None:
    assert _threads(tmp_path, slurm_cpus, environ, nodes=2) == expect


def test_env_option_wins(tmp_path: Path) -> None:
    assert _threads(tmp_path, "3", {}, env={"OMP_NUM_THREADS": "6"}) == "6 6 6"


def test_the_profiles_setup_wins(tmp_path: Path) -> None:
    assert _threads(tmp_path, "3", {}, setup=("export OMP_NUM_THREADS=7",)) == "7 7 7"


@pytest.mark.parametrize(("launcher", "slurm_cpus", "environ", "expect"), [
    ("torchrun", "4", {}, "2 2 2"),        # 2 workers share the task's 4 CPUs, not torchrun's 1
    ("torchrun", "1", {}, "1 1 1"),        # fewer CPUs than workers: still one each
    ("torchrun", "4", {"OMP_NUM_THREADS": "3"}, "3 3 3"),
    ("per-node", "5", {}, "2 2 2"),
])
def test_workers_of_one_task_share_its_cpus(launcher: str, slurm_cpus: str,
                                            environ: dict[str, str], expect: str,
                                            tmp_path: Path) -> None:
    got = _threads(tmp_path, slurm_cpus, environ, launcher=launcher, gpus_per_node=2)
    assert got == expect


@pytest.mark.parametrize(("shown", "tasks", "launcher", "slurm_cpus", "expect"), [
    # The dev cluster: 2 emulated nodes of 4 CPUs on a 2-core machine, 2 ranks a node.
    ("2", "2", "srun", "2", "1 1 1"),
    ("2", None, "srun", "3", "2 2 2"),           # one task that shows 2 of its 3 CPUs
    ("1", "2", "srun", "2", "1 1 1"),            # fewer CPUs than tasks: still one each
    ("8", "2", "srun", "2", "2 2 2"),            # a node that shows enough: SLURM's count
    ("2", "1", "torchrun", "4", "1 1 1"),        # 2 workers of one task on 2 CPUs shown
])
def test_no_more_threads_than_the_node_shows(shown: str, tasks: str | None, launcher: str,
                                             slurm_cpus: str, expect: str,
                                             tmp_path: Path) -> None:
    environ = {"NODE_CPUS_SHOWN": shown, **({"SLURM_NTASKS_PER_NODE": tasks} if tasks else {})}
    got = _threads(tmp_path, slurm_cpus, environ, launcher=launcher, gpus_per_node=2)
    assert got == expect


def test_a_users_threads_win_over_what_the_node_shows(tmp_path: Path) -> None:
    environ = {"NODE_CPUS_SHOWN": "2", "SLURM_NTASKS_PER_NODE": "2", "OMP_NUM_THREADS": "4"}
    assert _threads(tmp_path, "2", environ, gpus_per_node=2) == "4 4 4"

"""SLURM's commands that hand this terminal to a job: the dev shell's `srun --pty`, and a
`dev-run` started inside the job. Both keep the caller's stdin, stdout and stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from hpctrain.errors import SlurmUnavailableError
from hpctrain.slurm.runner import resolve_slurm_conf


def shell_argv(job_id: str, rc_file: Path, bash: str | None = None) -> tuple[str, ...]:
    """The dev shell as a step of job `job_id`: one task beside whatever else runs there."""
    # --export: no variable of this terminal but TERM (and SLURM's own) reaches the shell; the
    # start-up file puts in the job's environment instead. Without PATH bash needs its path.
    # --overlap: the step shares the job's CPUs, so that a dev-run's step can take them all.
    return ("srun", f"--jobid={job_id}", "--overlap", "--pty", "--nodes=1", "--ntasks=1",
            "--export=TERM", "--job-name=hpctrain-dev-shell",
            bash or shutil.which("bash") or "/bin/bash", "--rcfile", str(rc_file), "-i")


def _require_srun() -> None:
    if shutil.which("srun") is None:
        raise SlurmUnavailableError("srun not found: SLURM's client commands are not installed "
                                    "here", "run hpctrain on a cluster login node")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    conf = resolve_slurm_conf()
    if conf:
        env["SLURM_CONF"] = conf
    return env


def attach(job_id: str, rc_file: Path) -> int:
    """Run the dev shell on the job's first node in this terminal; its exit status."""
    _require_srun()
    return subprocess.call(shell_argv(job_id, rc_file), env=_env())


def run_script(script: Path, env: Mapping[str, str]) -> int:
    """Run a job script with bash inside the allocation it names (its srun steps join it)."""
    _require_srun()
    return subprocess.call(("bash", str(script)), env={**_env(), **env})

"""DDP ranks started by a real SLURM job step on the dev cluster: `srun` in a raw sbatch script.

Lightning reads the ranks, the world and the rendezvous from the variables srun sets for each
task; each rank writes its own output file (srun --output=rank-%t.out), and srun's own exit
code and its report of the tasks' exit codes land in the batch script's output.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .helpers import HERE, SRC

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

# srun's own line for tasks that ended non-zero, e.g. "srun: error: node1: tasks 0-1: Exited
# with exit code 75" (tasks that ended with 0 are not named).
_TASKS_EXITED = re.compile(r"^srun: error: \S+: tasks? ([\d,\-]+): Exited with exit code (\d+)$",
                           re.M)
_SRUN_EXIT = re.compile(r"^srun exit code (\d+)$", re.M)
SCRIPT = """#!/bin/bash
#SBATCH --job-name=hpctrain-ddp-test
#SBATCH --nodes=1
#SBATCH --ntasks-per-node={tasks}
#SBATCH --time=5
#SBATCH --output={folder_raw}/batch.out
#SBATCH --error={folder_raw}/batch.err
export PYTHONPATH={pythonpath} OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= {env}
# As hpctrain's own script does: a stop file older than this segment is an earlier one's
# (SLURM_JOB_START_TIME has whole seconds only, too coarse for a job started right after).
HPCTRAIN_SEGMENT_START="$(date +%s.%N)"
export HPCTRAIN_SEGMENT_START
srun --kill-on-bad-exit=0 --output={folder}/rank-%t.out --error={folder}/rank-%t.err \\
  {command}
echo "srun exit code $?"
"""


def _task_ids(spec: str) -> list[int]:
    """'0-1,3' -> [0, 1, 3]."""
    ids: list[int] = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        ids.extend(range(int(first), int(last or first) + 1))
    return ids


@dataclass
class RanksJob:
    """One sbatch job whose single step runs the trainer on `tasks` ranks of one node."""

    dc: DevClusterHandle
    job_id: str
    folder: Path
    tasks: int

    def rank_output(self, rank: int) -> str:
        return (self.folder / f"rank-{rank}.out").read_text()

    def rank_errors(self, rank: int) -> str:
        return (self.folder / f"rank-{rank}.err").read_text()

    def batch_output(self) -> str:
        return (self.folder / "batch.out").read_text()

    def step_ended(self) -> bool:
        """The batch script's echo after srun returned is there."""
        path = self.folder / "batch.out"
        return path.is_file() and _SRUN_EXIT.search(path.read_text()) is not None

    def wait(self, timeout_s: float = 300) -> dict[int, int]:
        """Wait for the job to end; return each rank's exit code as srun reported it."""
        row = self.dc.wait_job(self.job_id, timeout_s=timeout_s)
        assert row["State"] == "COMPLETED", f"{row}\n{self.describe()}"
        srun_code = int(_found(_SRUN_EXIT, self.batch_output(), self)[1])
        codes = dict.fromkeys(range(self.tasks), 0)
        for m in _TASKS_EXITED.finditer((self.folder / "batch.err").read_text()):
            codes.update(dict.fromkeys(_task_ids(m[1]), int(m[2])))
        # srun exits with the highest of its tasks' codes: the two reports agree.
        assert srun_code == max(codes.values()), f"srun {srun_code}, tasks {codes}"
        return codes

    def describe(self) -> str:
        """Everything the job wrote, for a failing assert's message (tails of long files)."""
        parts = []
        for path in sorted(self.folder.glob("*.out")) + sorted(self.folder.glob("*.err")):
            parts.append(f"--- {path.name}\n{path.read_text()[-2000:]}")
        return "\n".join(parts)

    def wait_for_epoch(self, run_dir: Path, timeout_s: float = 180) -> None:
        """Wait until metrics.json holds epoch 1: the ranks are training epoch 2."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if json.loads((run_dir / "metrics.json").read_text())["epochs"]:
                    return
            except (OSError, ValueError, KeyError):
                pass
            assert not self.step_ended(), f"the step ended before epoch 1:\n{self.describe()}"
            assert time.monotonic() < deadline, (
                f"epoch 1 not in metrics.json after {timeout_s} s:\n{self.describe()}")
            time.sleep(0.05)

    def signal_step(self, name: str) -> None:
        """`scancel --signal=NAME JOB`: SLURM signals the job's steps (not the batch shell)."""
        self.dc.client().run(["scancel", f"--signal={name}", self.job_id])


def _found(pattern: re.Pattern[str], text: str, job: RanksJob) -> re.Match[str]:
    m = pattern.search(text)
    assert m is not None, f"no {pattern.pattern!r} in the job's output:\n{job.describe()}"
    return m


def start_ranks(
    dc: DevClusterHandle, folder: Path, trainer_args: list[str], tasks: int = 2,
    env: dict[str, str] | None = None,
) -> RanksJob:
    """Submit a job whose step runs `python -m hpctrain.trainer ARGS` as `tasks` ranks."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "hpctrain.trainer", *trainer_args]
    script = folder / "ranks.sbatch"
    script.write_text(SCRIPT.format(
        tasks=tasks, folder_raw=folder, folder=shlex.quote(str(folder)),
        pythonpath=shlex.quote(f"{SRC}:{HERE}"),
        env=" ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()),
        command=shlex.join(command),
    ))
    return RanksJob(dc, dc.sbatch(script), folder, tasks)

"""The job's output files as SLURM names them: sbatch's --output and --error patterns filled in.

Read inside the job by the monitor (a silent program's clock) and the supervisor (the slice of
the error file each attempt wrote).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def output_files(patterns: Sequence[str], env: Mapping[str, str]) -> tuple[Path, ...]:
    """The job's output files from sbatch's patterns (--output, --error) as SLURM fills them
    in (%j, %A, %a, %x; %% is a '%'). The job's name is the batch script's (HPCTRAIN_JOB_NAME):
    in the monitor's own step SLURM_JOB_NAME is that step's name."""
    name = env.get("HPCTRAIN_JOB_NAME") or env.get("SLURM_JOB_NAME", "")
    fills = {"j": env.get("SLURM_JOB_ID", ""), "A": env.get("SLURM_ARRAY_JOB_ID", ""),
             "a": env.get("SLURM_ARRAY_TASK_ID", ""), "x": name,
             "%": "%"}
    out = []
    for pattern in patterns:
        if not pattern:
            continue
        text, i = [], 0
        while i < len(pattern):
            if pattern[i] == "%" and i + 1 < len(pattern) and pattern[i + 1] in fills:
                text.append(fills[pattern[i + 1]])
                i += 2
            else:
                text.append(pattern[i])
                i += 1
        out.append(Path("".join(text)))
    return tuple(dict.fromkeys(out))

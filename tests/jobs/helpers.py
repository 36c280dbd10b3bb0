"""Helpers for the job tests: recorded SLURM answers, tracked jobs, CLI runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hpctrain.history import History, JobRecord, NewJob
from hpctrain.places import LocalPlace
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import Result, plain_error
from hpctrain.slurm.transport import LocalTransport
from hpctrain.slurm.versions import dialect_for, parse_version
from tests.recorded import SLURM, UnrecordedCommandError, check_replay, pick_recording

# The set recorded from the dev cluster's SLURM (see its MANIFEST.json for each file's origin).
RECORDED = Path(__file__).resolve().parent / "recorded" / SLURM
# Every SLURM the job commands were recorded on: 22.05 answers in text, 24.11 in JSON (with
# the text forms of squeue and sacct beside, `<name>_text`).
SETS = ("slurm-22.05", "slurm-24.11")


def recording(name: str, slurm: str = SLURM) -> Result:
    """One command's output as recorded on the dev cluster by recorded/record.py."""
    data = json.loads((RECORDED.parent / slurm / f"{name}.json").read_text())
    return Result(tuple(data["argv"]), data["returncode"], data["stdout"], data["stderr"])


def recorded_jobs(slurm: str = SLURM) -> dict[str, str]:
    """Scenario -> job id of the recording run."""
    return dict(json.loads((RECORDED.parent / slurm / "jobs.json").read_text()))


# A recording, several of one program (each answers the command line it was recorded for), or
# a function of the command line.
Answer = Result | Sequence[Result] | Callable[[tuple[str, ...]], Result]


class ReplayClient(SlurmClient):
    """A SlurmClient whose commands answer with recordings; `answers` maps a program to them.

    Only `run` is replaced, so the client's own argv building, error handling and parsing
    are what the tests exercise. A recording answers only the command line it was recorded
    for (job ids aside): one the client builds otherwise fails as UnrecordedCommandError.
    `calls` is the replay's own record of the command lines it answered, in order.
    """

    def __init__(self, answers: dict[str, Answer], slurm: str = SLURM) -> None:
        super().__init__(LocalTransport(None), timeout_s=5)
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []
        # The recordings' SLURM (their set's name) decides the output format, as the version
        # the real client asks `sinfo --version` for would.
        self._dialect = dialect_for(parse_version(slurm), {})

    def run(
        self, argv: Sequence[str], *, input: str | None = None, timeout_s: float | None = None,
        check: bool = True, cwd: str | Path | None = None,
    ) -> Result:
        argv = tuple(argv)
        self.calls.append(argv)
        if argv[0] not in self.answers:
            raise UnrecordedCommandError(f"no recording answers `{shlex.join(argv)}` "
                                         f"(this test replays {sorted(self.answers)} only)")
        answer = self.answers[argv[0]]
        if isinstance(answer, Result):
            res = answer
        elif callable(answer):
            res = answer(argv)
        else:
            res = pick_recording(argv, answer)
        check_replay(argv, res)
        res = Result(argv, res.returncode, res.stdout, res.stderr)
        if check and res.returncode != 0:
            raise plain_error(res)
        return res

    def cluster_name(self) -> str | None:
        return "hpctrain-dev"


def here(client: SlurmClient, workdir: Path) -> LocalPlace:
    """This machine as a place whose SLURM answers through `client` (a ReplayClient)."""
    return LocalPlace(lambda: client, workdir)


def new_job(job_id: str, **kw: object) -> NewJob:
    fields: dict[str, object] = dict(
        job_id=job_id, cluster="hpctrain-dev", profile="local", job_name=f"job{job_id}",
        partition="debug", nodes=1, gpus_per_node=1, total_gpus=1, command=["true"],
        run_dir=None, script_path=None, stdout_path=None, stderr_path=None, workdir="/tmp",
        git_commit=None, git_dirty=None, time_limit_s=60,
    )
    fields.update(kw)
    return NewJob(**fields)


def track(history: History, *job_ids: str, **kw: object) -> list[JobRecord]:
    return [history.add(new_job(j, **kw)) for j in job_ids]


def hpctrain(
    *args: str, env: dict[str, str], cwd: Path, timeout_s: float = 120.0,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    """The real entry point in a subprocess, as a user's shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "hpctrain", *args], env=env, cwd=cwd, capture_output=True,
        text=True, timeout=timeout_s, stdin=stdin, check=False,
    )


def cluster_env(slurm_conf: Path | str, home: Path, **extra: str) -> dict[str, str]:
    """Environment for hpctrain against the dev cluster with a history of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("HPCTRAIN_HOME", "SLURM_CONF")}
    env.update(HPCTRAIN_HOME=str(home), SLURM_CONF=str(slurm_conf), **extra)
    return env

"""The run directory: the one definition of every file and marker a job's run directory holds.

A run directory (`$HPCTRAIN_RUN_DIR`) is a contract between parts that never import each other:
the sbatch script (templates/sbatch.sh.j2 receives these names as `run_files`), the trainer
inside the job, the monitor on every node, the job watcher and `status` on the login node, and
the studies. Each name is spelled here only; tests/unit/test_rundir.py fails on a copy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import overload

# Written by `submit` before the job is queued.
SCRIPT = "job.sbatch"  # a race writes one per alternative: job-1x4.sbatch, ...
PROFILE = "profile.yaml"  # the resolved profile the job was planned with
CONFIG_COPY = "config-snapshot"  # + the --config file's suffix: its copy as submitted
REQUEST = "request.json"  # the options the job was planned from (a rerun plans them again)
RUN_INFO = "run.json"  # git commit and dirty state, job ids once known
UNCONFIRMED = "SUBMIT-UNCONFIRMED"  # sbatch timed out: the job may or may not exist
ALTERNATIVES = "alternatives.txt"  # a race's ids, one "JOBID NODESxGPUS" line each
CODE = "code"  # the job's working directory: links into its code snapshot
GIT_DIFF = "git.diff"  # the work tree's changes against the commit in run.json (if any)

# Written by the sbatch script on the compute node.
ENVIRONMENT = "environment.json"  # the job's Python: version, packages, their hash
RACE_CLAIM = "race-claim"  # the first alternative to start makes it (mkdir is atomic)
RACE_WINNER = "winner"  # inside RACE_CLAIM: "JOBID NODESxGPUS" of the winner
STOP_REQUESTED = "stop-requested"  # SLURM's warning arrived: "USR1 <unix time>"

# Written by the trainer.
STOP_SAVED = "stop-saved"  # the safe stop's checkpoint is on disk
TRAINING_COMPLETE = "training-complete"  # a chain's later segments have nothing left to do
CONFIG = "config.yaml"  # the trainer's resolved configuration
IMPORTS = "imports.json"  # the installed distributions behind the modules the run imported
LAST_CKPT = "last.ckpt"
BEST_CKPT = "best.ckpt"
METRICS = "metrics.json"

# Written by the batch script and every rank (hpctrain.timeline): the start-up's marks, one
# <node>-<rank>.jsonl a rank and one <node>-batch.jsonl of the batch script.
STARTUP_DIR = "startup"

# Written by the monitor.
MONITOR_DIR = "monitor"  # one <node>.jsonl of samples per node
MONITOR_SUMMARY = "monitor-summary.json"
# Each rank's last step and its time, one <node>-<rank>.json each (hpctrain.progress; the
# packaged trainer writes it, a user's program with one call); a rank's stack is dumped
# beside it into <node>-<rank>.stack on SIGQUIT.
PROGRESS_DIR = "rank-progress"
# The monitor's evidence of a stall: every rank's stack (<node>-<rank>.txt), each node's view
# (<node>.json), and the summary the batch node writes before it ends the job.
STALL_DIR = "stall-evidence"
STALL_REPORT = "stall.json"
STALL_LOOKS = "looks.jsonl"  # inside STALL_DIR: each look the watcher took, and what it saw
# The rank hook (hpctrain.rankhook), in every rank of the launch step that starts a process
# group: its registration (<node>-<rank>.json: pid, rank, world), into RANKS_DIR; the flight
# recorder's record of its collectives (<node>-<rank>.json), into FLIGHT_DIR of STALL_DIR, when
# the stall watcher writes FLIGHT_REQUEST there.
RANKS_DIR = "rank-registry"  # not "ranks": programs write their own files there
FLIGHT_DIR = "flight-recorder"
FLIGHT_REQUEST = "flight-request"
# `--retries`: each attempt the job's faults started, "NEW_ID OLD_ID REASON NODE" a line.
RETRIES = "retries.txt"
# `--restarts` (hpctrain.supervisor, on the batch node): one JSON line an attempt of the launch
# step inside this job (its start, end, exit, cause, what followed); the monitor's stall watch
# asks for a restart by writing RESTART_REQUEST (the stall's report), which the supervisor takes.
ATTEMPTS = "attempts.jsonl"
RESTART_REQUEST = "restart-request.json"
# The trainer's tracker run: one id for every start of the run (in-job restarts, requeues, a
# chain's segments, retries), which resumable trackers (W&B, MLflow, Comet) are given.
TRACKER_RUN = "tracker-run.json"
# What `status JOB` and `stats` read of a run directory that is many files (a node's or a
# rank's each): from a job submitted through a login, copied to this disk in one round trip. An
# ended job's monitor is its summary: a week's samples are megabytes.
OVERVIEW = (MONITOR_DIR, STARTUP_DIR, ATTEMPTS)
OVERVIEW_ENDED = (MONITOR_SUMMARY, STARTUP_DIR, ATTEMPTS)
# Not a file: the monitor's srun step name, by which `why` tells its steps from the job's.
MONITOR_STEP = "hpctrain-monitor"

# A dev job (`hpctrain dev`, docs/dev.md): its script writes the environment rank 0 would start
# with (DEV_ENV, bash to source) and the shell's start-up file (DEV_RC); the shell's exit leaves
# DEV_EXITED, which ends the job; each `hpctrain dev-run` runs in DEV_RUNS/<n>/.
DEV_ENV = "dev-env.sh"
DEV_RC = "dev-shell.rc"
DEV_EXITED = "dev-shell-exited"
DEV_RUNS = "dev-runs"
# A dev job in a container (submission/devrelay.py): beside DEV_ENV its script saves the
# runtime's words and srun's options for it, the shell's step what the runtime passed in (to
# source, and as NAME=VALUE words), and dev-run asks the script, outside, through a FIFO; each
# relayed run of DEV_RUNS/<n>/ has its RELAY_* files.
DEV_CONTAINER_WORDS = DEV_ENV + ".container"
DEV_CONTAINER_SRUN = DEV_ENV + ".container-srun"
DEV_INSIDE = DEV_ENV + ".inside"
DEV_INSIDE_ENV = DEV_ENV + ".inside-env"
DEV_RELAY = DEV_ENV + ".relay"
RELAY_REQUEST = "relay-request"
RELAY_OUTPUT = "relay-output"
RELAY_STOP = "relay-stop"
RELAY_RC = "relay-rc"
# `hpctrain dev --attach`: the sshd its ssh alias starts inside the dev job reads its config,
# its host key and the laptop's key from DEV_SSH/ (submission/devssh.py).
DEV_SSH = "dev-ssh"
# The dev job's warning before its time limit: the shell's terminal (DEV_TTY, written by the
# shell) hears it at once; where it cannot, the shell shows DEV_WARNING at its next prompt.
DEV_TTY = "dev-shell-tty"
DEV_WARNING = "dev-time-warning"

# Written by `hpctrain sweep` into the sweep's run directory: each point's run directory is
# POINTS/<point>/, the point's settings are its POINT_ARGS (one argument per line), SLURM's
# output of each array task goes into SWEEP_LOGS/, the points and arrays into SWEEP_INFO.
POINTS = "points"
POINT_ARGS = "point.args"
SWEEP_LOGS = "task-logs"
SWEEP_INFO = "sweep.json"
SWEEP_REPORT = "sweep-report.json"
SWEEP_PLOT = "sweep.png"

# Written by a scaling study into its own directory, beside its runs' directories.
SCALING_REPORT = "scaling.json"
SCALING_PLOT = "scaling.png"


def for_template() -> dict[str, str]:
    """The names as the sbatch template reads them: `{{ run_files.stop_requested }}`."""
    return {k.lower(): v for k, v in globals().items() if k.isupper() and isinstance(v, str)}


class _In:
    """A named path inside a run directory: `RunDir(d).metrics` is `d / METRICS`."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    @overload
    def __get__(self, obj: None, owner: type) -> _In: ...
    @overload
    def __get__(self, obj: RunDir, owner: type) -> Path: ...
    def __get__(self, obj: RunDir | None, owner: type) -> _In | Path:
        return self if obj is None else obj.root.joinpath(*self.parts)


@dataclass(frozen=True)
class RunDir:
    """A run directory as a value: every file and folder above, by name (submitit's JobPaths).

    Code joins a run directory's paths here and nowhere else; `RunDir(d).stall_dir / x` for
    a file of a node or rank inside one of its folders.
    """

    root: Path

    def __init__(self, root: Path | str) -> None:
        object.__setattr__(self, "root", Path(root))

    script = _In(SCRIPT)
    profile = _In(PROFILE)
    request = _In(REQUEST)
    run_info = _In(RUN_INFO)
    unconfirmed = _In(UNCONFIRMED)
    alternatives = _In(ALTERNATIVES)
    code = _In(CODE)
    git_diff = _In(GIT_DIFF)
    environment = _In(ENVIRONMENT)
    race_claim = _In(RACE_CLAIM)
    race_winner = _In(RACE_CLAIM, RACE_WINNER)
    stop_requested = _In(STOP_REQUESTED)
    stop_saved = _In(STOP_SAVED)
    training_complete = _In(TRAINING_COMPLETE)
    config = _In(CONFIG)
    imports = _In(IMPORTS)
    last_ckpt = _In(LAST_CKPT)
    best_ckpt = _In(BEST_CKPT)
    metrics = _In(METRICS)
    startup_dir = _In(STARTUP_DIR)
    monitor_dir = _In(MONITOR_DIR)
    monitor_summary = _In(MONITOR_SUMMARY)
    progress_dir = _In(PROGRESS_DIR)
    stall_dir = _In(STALL_DIR)
    stall_looks = _In(STALL_DIR, STALL_LOOKS)
    stall_report = _In(STALL_REPORT)
    ranks_dir = _In(RANKS_DIR)
    flight_dir = _In(STALL_DIR, FLIGHT_DIR)
    flight_request = _In(STALL_DIR, FLIGHT_REQUEST)
    retries = _In(RETRIES)
    attempts = _In(ATTEMPTS)
    restart_request = _In(RESTART_REQUEST)
    tracker_run = _In(TRACKER_RUN)
    points = _In(POINTS)
    point_args = _In(POINT_ARGS)
    sweep_logs = _In(SWEEP_LOGS)
    sweep_info = _In(SWEEP_INFO)
    sweep_report = _In(SWEEP_REPORT)
    sweep_plot = _In(SWEEP_PLOT)
    scaling_report = _In(SCALING_REPORT)
    scaling_plot = _In(SCALING_PLOT)
    dev_env = _In(DEV_ENV)
    dev_rc = _In(DEV_RC)
    dev_exited = _In(DEV_EXITED)
    dev_runs = _In(DEV_RUNS)
    dev_ssh = _In(DEV_SSH)

    def point(self, name: str) -> RunDir:
        """A sweep point's own run directory, inside POINTS."""
        return RunDir(self.root / POINTS / name)

    def dev_run(self, number: int) -> RunDir:
        """A dev job's `dev-run` number `number`, its own run directory inside DEV_RUNS."""
        return RunDir(self.root / DEV_RUNS / f"{number:03d}")


@dataclass(frozen=True)
class RunFile:
    """A file submit writes into the run directory: given text, or a copy of a user's file."""

    path: Path
    text: str | None = None
    copy_of: Path | None = None
    mode: int | None = None



def runs_folder(output_dir: str, cwd: Path) -> Path:
    """The folder a profile's run directories go into, absolute (output_dir is cwd-relative)."""
    return Path(os.path.abspath(cwd / Path(output_dir).expanduser()))

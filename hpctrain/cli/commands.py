"""The command table: each command's module and summary line, and the run's --debug.

Both the error boundary (cli/__init__.py) and the app (cli/root.py) read it; neither imports
typer for it.
"""

from __future__ import annotations

# The command modules in help order, and which module holds each command. Only the module
# of the command being run is imported and turned into click commands (typer inspects every
# registered signature at start-up: ~20 ms for all of them); `--help` and unknown commands
# get none (cli/root.py: _Root lists them from SUMMARY). tests/unit/test_cli.py checks this table
# matches the modules.
MODULES = ("render", "submit", "dev", "jobs", "why", "nodes", "free", "snapshots", "login", "train",
           "profiles", "devcluster", "data", "stats", "scale", "sweep", "completion")
MODULE_OF = {
    "render": "render", "submit": "submit", "dev": "dev", "dev-run": "dev",
    "status": "jobs", "logs": "jobs", "cancel": "jobs",
    "why": "why",
    "diff": "snapshots", "rerun": "snapshots", "gc": "snapshots", "login": "login",
    "train": "train", "profiles": "profiles", "devcluster": "devcluster", "data": "data",
    "stats": "stats", "scale": "scale", "scale-report": "scale",
    "sweep": "sweep", "sweep-report": "sweep", "completion": "completion", "nodes": "nodes",
    "free": "free",
}

# Each command's line in its group's command list. click otherwise cuts the first sentence of
# the help at the list's width with "..." (60 characters in an 80-column terminal); these fit.
# tests/unit/test_cli_frictions.py checks that every command has one and nothing is cut.
SUMMARY = {
    "render": "Render the sbatch script of a job; submits nothing",
    "submit": "Render, submit and record a job in its own run directory",
    "dev": "A shell on a job's node with its batch environment",
    "dev-run": "In a dev shell: run the job on every rank of it",
    "status": "Show tracked jobs: the unfinished and the latest ones",
    "logs": "Print a job's output; -f follows it until the job ends",
    "cancel": "Cancel tracked jobs: by id, a chain, a race or a sweep",
    "why": "Why a job failed, waits or wasted what it asked for",
    "nodes": "Nodes a failure pointed at: quarantined, excluded",
    "free": "Free GPUs per partition; where a request starts soonest",
    "diff": "What differs between two runs: code, settings, topology",
    "rerun": "Submit a job again from its code snapshot",
    "gc": "Remove code snapshots that no recorded job needs",
    "login": "Open the ssh connection later commands reuse",
    "train": "Train a packaged task locally, without SLURM",
    "stats": "GPU, CPU, memory and energy use per node, with waste notes",
    "scale": "Run the trainer at several topologies; compare speedups",
    "scale-report": "The table and plot of a scaling study",
    "sweep": "Run one training at many points as SLURM job arrays",
    "sweep-report": "The table of a sweep's points and its best point",
    "completion": "Print the shell completion script (bash, zsh, fish)",
    "profiles": "List, show, validate, discover and check cluster profiles",
    "profiles list": "List the shipped and user profiles",
    "profiles show": "Show a profile, fully resolved (extends and defaults)",
    "profiles validate": "Check a profile file or name; report every problem",
    "profiles discover": "Draft a profile from the live cluster (on a login node)",
    "profiles check": "Hold a profile against the live cluster",
    "profiles probe": "Probe a compute node's network and GPUs into your profile",
    "devcluster": "A real SLURM on this machine that emulates a profile",
    "devcluster up": "Start the dev cluster (a no-op if it runs this profile)",
    "devcluster status": "Show the dev cluster's daemons, profile and sinfo",
    "devcluster down": "Stop the daemons `up` started, nothing else",
    "data": "Datasets for the packaged trainer (fetch on a login node)",
    "data fetch": "Download and verify a dataset's files",
}

# The run's --debug, set by the root's callback (cli/root.py) or by a plain render/submit.
state = {"debug": False}
# The commands whose usual command lines are read without click (cli/argv.py).
PLAIN = ("render", "submit", "dev")


def top_level() -> list[str]:
    """The root's commands and groups in help order: SUMMARY's keys without a space."""
    return [name for name in SUMMARY if " " not in name]

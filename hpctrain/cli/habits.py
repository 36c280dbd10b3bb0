"""sbatch options that hpctrain does not take, and what to write instead."""

from __future__ import annotations

# hpctrain's own spelling where it has one; the rest reach sbatch through --sbatch-arg.
_INSTEAD = {
    "--gres": "--gpus-per-node N (hpctrain writes the profile's GPU request)",
    "--gpus-per-task": "--gpus-per-node N (one task per GPU with --launcher srun)",
    "--ntasks": "--nodes and --gpus-per-node (one task per GPU with --launcher srun)",
    "-n": "--nodes and --gpus-per-node (one task per GPU with --launcher srun)",
    "--ntasks-per-node": "--gpus-per-node N (one task per GPU with --launcher srun)",
    "--cpus-per-gpu": "--cpus-per-task N (one task per GPU)",
    "-c": "--cpus-per-task N",
    "--mem-per-gpu": "--mem (memory per node)",
    "--mem-per-cpu": "--mem (memory per node)",
    "--export": "--env KEY=VALUE (repeatable)",
    "-q": "--qos NAME",
    "--dependency": "submit --after JOBID",
    "-d": "submit --after JOBID",
    "--array": "`hpctrain sweep` (a grid or list of runs as job arrays)",
    "-a": "`hpctrain sweep` (a grid or list of runs as job arrays)",
    "--output": "nothing: each run's logs go to its run directory (`hpctrain logs JOB`)",
    "--error": "nothing: each run's logs go to its run directory (`hpctrain logs JOB --err`)",
    "--chdir": "nothing: the job starts in the run directory, with your project beside it",
    "-D": "nothing: the job starts in the run directory, with your project beside it",
}


def hint(option: str, command: str | None, takes_sbatch_arg: bool) -> str:
    """What to write instead of `option`, which `command` does not take."""
    flag, _, value = option.partition("=")
    instead = _INSTEAD.get(flag)
    if flag.startswith("--"):
        passthrough = f"--sbatch-arg={flag}={value or 'VALUE'}"
    else:
        passthrough = f"--sbatch-arg='{flag} {value or 'VALUE'}'"
    help_cmd = f"`hpctrain {command} --help`" if command else "`hpctrain --help`"
    if not takes_sbatch_arg:
        return f"hpctrain's spelling: {instead}" if instead else f"see {help_cmd}"
    if instead:
        return f"hpctrain's spelling: {instead}; or pass it to sbatch as {passthrough}"
    return f"see {help_cmd}; an sbatch option reaches sbatch as {passthrough}"

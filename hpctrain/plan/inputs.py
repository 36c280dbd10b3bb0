"""Rules for the values that reach the script as text: names, paths, environment, command."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpctrain.plan.model import TRAINER_COMMAND, JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import CONTROL
from hpctrain.tasks.registry import DEFAULT_TASK
from hpctrain.trainconfig.options import config_args

# The packaged trainer's command when a request names no settings: the default task's.
DEFAULT_TRAINER_ARGS = ("--task", DEFAULT_TASK)

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEY = re.compile(r"(KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL)", re.IGNORECASE)


@dataclass(frozen=True)
class Inputs:
    """The log directory and the environment variables, as checked."""

    log_dir: str
    env: tuple[tuple[str, str], ...]


def secret_like(key: str) -> bool:
    """Names such as COMET_API_KEY, HF_TOKEN or DB_PASSWORD hold secrets."""
    return bool(_SECRET_KEY.search(key))


def check_inputs(req: JobRequest) -> Outcome[Inputs]:
    """The job name, the paths and the environment, refused where a script cannot hold them."""
    log_dir = req.log_dir or req.profile.output_dir
    paths = [
        (log_dir, "the log directory"),
        (req.run_dir, "--run-dir"),
        (req.python_env, "the Python environment path"),
    ]
    problems = [
        *_job_name_problems(req.job_name),
        *(p for value, what in paths if value is not None for p in _path_problems(value, what)),
        *_encoding_problems(req),
        *_settings_secret_problems(req),
    ]
    env: list[tuple[str, str]] = []
    for key, value in req.env.items():
        problem = _env_problem(key, value)
        if problem:
            problems.append(problem)
        else:
            env.append((key, value))
    return Outcome(Inputs(log_dir, tuple(env)), tuple(problems))


def _encoding_problems(req: JobRequest) -> tuple[str, ...]:
    # Bytes that are not UTF-8 reach Python as lone surrogates; a script file cannot hold them.
    fields = {
        "--job-name": [req.job_name],
        "--env": [*req.env, *req.env.values()],
        "--sbatch-arg": list(req.sbatch_args),
        "a path (--run-dir, --python-env or the log directory)": [
            v for v in (req.run_dir, req.python_env, req.log_dir) if v is not None
        ],
    }
    return tuple(
        f"{what} contains bytes that are not UTF-8 text; use UTF-8 (or plain ASCII)"
        for what, values in fields.items()
        if any(not _is_utf8(v) for v in values)
    )


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _settings_secret_problems(req: JobRequest) -> tuple[str, ...]:
    """Secret-looking keys in the trainer's settings: the job's command (the script, the
    history) carries every setting, as --env carries its variables."""
    if req.trainer is None:
        return ()
    custom = req.trainer.custom
    keys = [*_dotted_keys(custom.module_kwargs, "custom.module_kwargs"),
            *_dotted_keys(custom.datamodule_kwargs, "custom.datamodule_kwargs")]
    return tuple(
        f"{key}: looks like a secret, and hpctrain never writes secrets into scripts or the "
        "history; have your module read it from an environment variable that you export "
        "before submitting (sbatch passes your environment to the job)"
        for key in keys if secret_like(key.rsplit(".", 1)[-1])
    )


def _dotted_keys(value: object, prefix: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    keys = []
    for key, inner in value.items():
        keys += [f"{prefix}.{key}", *_dotted_keys(inner, f"{prefix}.{key}")]
    return keys


def _job_name_problems(name: str) -> tuple[str, ...]:
    if not name:
        return ("--job-name is empty; give a name, e.g. --job-name spiral",)
    if CONTROL.search(name):
        return ("--job-name contains a newline or control character; remove it",)
    if "/" in name:
        return (f"--job-name {name!r} contains '/': it becomes part of log file names",)
    if len(name) > 200:
        return ("--job-name is longer than 200 characters; shorten it",)
    return ()


def _path_problems(value: str, what: str) -> tuple[str, ...]:
    if CONTROL.search(value):
        return (f"{what} contains a newline or control character; choose another path",)
    if "%" in value:
        return (f"{what} {value!r} contains '%', which SLURM reads as a file-name pattern",)
    return ()


def _env_problem(key: str, value: str) -> str | None:
    if not _ENV_KEY.match(key):
        return f"--env {key!r}: variable names are letters, digits and _"
    if secret_like(key):
        return (
            f"--env {key}: looks like a secret, and hpctrain never writes secrets into "
            f"scripts or the history; export {key} in your shell before submitting "
            "(sbatch passes your environment to the job)"
        )
    if "\x00" in value:
        return f"--env {key}: the value contains a NUL byte"
    return None


def choose_command(req: JobRequest) -> Outcome[tuple[str, ...]]:
    """The command the job runs: the user's, else the packaged trainer with the request's
    settings written out (a file's setting and the same flag give the same command, and the
    job does not read the file again: an edit after submit leaves it alone)."""
    problems: list[str] = []
    if req.command:
        command = tuple(req.command)
        if req.config is not None:
            problems.append("--config applies to the packaged trainer; drop it or the command")
    else:
        settings = config_args(req.trainer) if req.trainer is not None else DEFAULT_TRAINER_ARGS
        command = (*TRAINER_COMMAND, *settings, *req.trainer_args)
    if any(CONTROL.search(a.replace("\t", " ")) for a in command):
        problems.append("the command contains a newline or control character; remove it")
    if not all(_is_utf8(a) for a in command):
        problems.append("the command contains bytes that are not UTF-8 text; use UTF-8 "
                        "(or plain ASCII)")
    return Outcome(command, tuple(problems))

"""Job plan -> sbatch script text (pure), through Jinja templates with quoting filters."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hpctrain import __version__
from hpctrain.errors import SecretError, UnsafeValueError
from hpctrain.files.resources import templates_dir
from hpctrain.plan import JobPlan, JobRequest, build_plan, secret_like
from hpctrain.plan.launchers import LAUNCHERS
from hpctrain.plan.restart import runs_trainer
from hpctrain.render import templating
from hpctrain.values import rundir

_SBATCH_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/=+@%-]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MIN_SECRET_LEN = 8


def sh_quote(value: object) -> str:
    """Quote one value for bash; refuse what no quoting makes safe."""
    text = str(value)
    if "\x00" in text:
        raise UnsafeValueError(f"value {text!r} contains a NUL byte", "remove it")
    return shlex.quote(text)


def sbatch_quote(value: object) -> str:
    """Quote a value for an #SBATCH line, whose parser knows "..." and backslash escapes."""
    text = str(value)
    if _CONTROL.search(text):
        raise UnsafeValueError(
            f"value {text!r} contains a control character", "#SBATCH lines hold one line each"
        )
    if _SBATCH_PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_option(arg: str) -> str:
    """Quote the value part of a `--name=value` option for an #SBATCH line."""
    if arg.startswith("--") and "=" in arg:
        name, _, value = arg.partition("=")
        return f"{name}={sbatch_quote(value)}"
    return sbatch_quote(arg)


def comment(value: object) -> str:
    """Make text safe inside a `#` comment: no line breaks can escape it."""
    return _CONTROL.sub("?", str(value))


def _sh_path(value: str) -> str:
    """Quote a path, keeping a leading ~/ expandable in the job's shell."""
    if value.startswith("~/"):
        return '"$HOME"/' + sh_quote(value[2:])
    return sh_quote(value)


def _shjoin(args: Iterable[object]) -> str:
    return " ".join(sh_quote(a) for a in args)


# The template's filters: every value reaches the script through one of them.
FILTERS = {"sh": sh_quote, "sh_path": _sh_path, "sbatch": sbatch_quote,
           "sbatch_option": sbatch_option, "comment": comment, "shjoin": _shjoin}


def _launch(plan: JobPlan) -> tuple[str, ...]:
    """The program torchrun starts: python's own args become torchrun's, others --no-python."""
    cmd = plan.command
    if plan.launcher != "torchrun":
        return cmd
    if cmd and re.fullmatch(r"(.*/)?python[0-9.]*", cmd[0]):
        return cmd[1:]
    return ("--no-python", *cmd)


@dataclass(frozen=True)
class LogPatterns:
    """The job's stdout/stderr file patterns as sbatch gets them (SLURM expands %x, %j)."""

    stdout: str
    stderr: str


def log_patterns(plan: JobPlan) -> LogPatterns:
    """Where the plan's job writes its output: `<log_dir>/<job name>-<job id>.out|.err`; an
    array task's as `<job name>-<array job id>_<task id>`, known at submit."""
    if plan.array is not None:
        return LogPatterns(stdout=f"{plan.log_dir}/%x-%A_%a.out",
                           stderr=f"{plan.log_dir}/%x-%A_%a.err")
    return logs_in(plan.log_dir)


def logs_in(log_dir: str) -> LogPatterns:
    """The output files' patterns of a job logging into `log_dir`."""
    return LogPatterns(stdout=f"{log_dir}/%x-%j.out", stderr=f"{log_dir}/%x-%j.err")


def render_script(plan: JobPlan, *, environ: Mapping[str, str] | None = None) -> str:
    """Render the sbatch script; refuse it if it would carry a secret from `environ`."""
    text = templating.render(
        templates_dir(), "sbatch.sh.j2", FILTERS, plan=plan, version=__version__,
        launch_args=_launch(plan), logs=log_patterns(plan), launcher=LAUNCHERS[plan.launcher],
        trainer=runs_trainer(plan.command), run_files=rundir.for_template(),
    )
    if environ is not None:
        check_no_secrets(text, environ)
    return text


def check_no_secrets(text: str, environ: Mapping[str, str]) -> None:
    """Refuse text that contains the value of a secret-looking environment variable."""
    for key, value in environ.items():
        if secret_like(key) and len(value) >= _MIN_SECRET_LEN and value in text:
            raise SecretError(
                f"the job would contain the value of {key}",
                f"secrets are never written into scripts or the history; let the job read "
                f"{key} from its environment instead of passing it on the command line",
            )


def plan_script(
    req: JobRequest, *, environ: Mapping[str, str] | None = None
) -> tuple[JobPlan, str]:
    """The validated plan and its sbatch script: the one path render and submit share."""
    plan = build_plan(req)
    return plan, render_script(plan, environ=environ)


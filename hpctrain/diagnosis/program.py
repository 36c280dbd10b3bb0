"""Why rules of the program's own errors, as its log shows them: an exception, an import or a
file missing, the GPU's memory, a refused command line, a signal."""

from __future__ import annotations

from collections.abc import Callable

from hpctrain.diagnosis.facts import (
    SIGNALS,
    failed_tasks,
    first,
    frame_text,
    rank_text,
    step_signal,
    with_task,
)
from hpctrain.diagnosis.logscan import Finding
from hpctrain.diagnosis.model import Diagnosis, Evidence, where
from hpctrain.diagnosis.peers import consequences
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState


def _by_log(kind: str, summary: Callable[[Finding], str], fix: Callable[[Finding], str]
            ) -> Callable[[Evidence, Row], Diagnosis | None]:
    def rule(ev: Evidence, last: Row) -> Diagnosis | None:
        found = first(ev, kind)
        if found is None:
            return None
        return Diagnosis(kind, summary(found), fix(found), evidence=with_task(ev, found))
    return rule


def _cuda_oom(f: Finding) -> str:
    return f"the GPU ran out of memory (it tried to allocate {f.info.get('size', '?')})"


cuda_oom = _by_log("cuda_oom", _cuda_oom, lambda f: "a smaller batch per GPU "
                   "(`trainer.batch_size`, with `trainer.global_batch` to keep the global "
                   "batch), or more GPUs")


def _env_name(ev: Evidence) -> str:
    exe = (ev.environment or {}).get("executable")
    return str(exe or ev.python_env or "the job's python")


def import_error(ev: Evidence, last: Row) -> Diagnosis | None:
    found = first(ev, "import_error")
    if found is None:
        return None
    module = found.info.get("module", "?")
    return Diagnosis(
        "import_error",
        f"Python could not import `{module}`{frame_text(found)}; the job ran {_env_name(ev)}",
        f"install `{module.split('.')[0]}` into that environment, or submit with "
        "`--python-env PATH` naming the environment that has it",
        evidence=with_task(ev, found))


def missing_file(ev: Evidence, last: Row) -> Diagnosis | None:
    found = first(ev, "missing_file")
    if found is None:
        return None
    path = found.info.get("path", "?")
    relative = "" if path.startswith("/") else (
        "; a relative path is read from the job's working directory, the code snapshot, "
        "which holds only what git lists: name data with `--in-place PATH` or an absolute path")
    return Diagnosis(
        "missing_file", f"a file the job opened does not exist: `{path}`{frame_text(found)}",
        f"check the path{relative}", evidence=with_task(ev, found))


def exception(ev: Evidence, last: Row) -> Diagnosis | None:
    """The first rank's own error: its traceback is the evidence, whatever its peers said."""
    found = first(ev, "exception")
    if found is None:
        return None
    frame = found.user_frame()
    whose = ("hpctrain's" if frame and "/hpctrain/" in frame.file else "the job's")
    return Diagnosis(
        "exception",
        f"{rank_text(ev, found)}{'raised' if found.rank else whose + ' code raised'} "
        f"{found.info.get('type')}: {found.info.get('message')}{frame_text(found)}"
        f"{consequences(ev, found)}",
        "fix the error at that line; `hpctrain logs JOB` shows the whole traceback"
        if frame else "the traceback has no frame outside the libraries; read it whole with "
        "`hpctrain logs JOB`", evidence=with_task(ev, found))


def usage(ev: Evidence, last: Row) -> Diagnosis | None:
    """The program's argument parser refused its command line (argparse's exit 2)."""
    found = first(ev, "usage_error")
    if found is None or last.state is JobState.COMPLETED:
        return None
    return Diagnosis(
        "usage_error", f"{found.info.get('prog')} refused its command line: "
        f"{found.info.get('message')}",
        "give the flags the program takes (`python PROGRAM --help`); in a sweep, put each "
        "swept value where the program takes it: `--lr {lr}` (docs/sweeps.md)",
        evidence=with_task(ev, found))


def signal(ev: Evidence, last: Row) -> Diagnosis | None:
    task = next((f for f in failed_tasks(ev) if f.kind == "task_signal"), None)
    sig = last.signal or step_signal(ev)
    if task is None and not sig:
        return None
    if sig:
        name = SIGNALS.get(sig, f"signal {sig}")
    else:
        name = task.info["what"] if task is not None else "a signal"
    return Diagnosis(
        "signal", f"a process of the job was ended by {name}",
        "a segmentation fault or abort points at a native library (a CUDA/NCCL or a "
        "compiled extension's version mismatch): run one rank alone to reproduce it",
        evidence=tuple(filter(None, (f"sacct: ExitCode {last.exit_code}:{last.signal}"
                                     + (f", a step ended by signal {sig}" if sig else ""),
                                     where(task) if task else None))))

"""`hpctrain why`'s parsers and rules on recorded output: jobs provoked on the dev cluster
(recorded/slurm-*/, by recorded/record.py) and published error output of what a CPU cluster
cannot produce (recorded/published/, each with its address)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain.diagnosis.advice import advise
from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.logscan import scan
from hpctrain.diagnosis.model import Evidence
from hpctrain.slurm import accounting
from hpctrain.slurm.runner import Result
from tests.recorded import check_replay

RECORDED = Path(__file__).resolve().parent / "recorded"
SETS = sorted(p for p in RECORDED.glob("slurm-*") if p.is_dir())

# case -> (cause, words the summary must hold, certain)
EXPECTED = {
    "exception": ("exception", ("ZeroDivisionError: division by zero",
                                "/code/pkg/exc.py:2 (ratio)"), True),
    "import_error": ("import_error", ("`nosuchmodule_for_why`", "/code/pkg/imp.py:2"), True),
    "missing_file": ("missing_file", ("`data/train.csv`", "/code/pkg/miss.py:1"), True),
    "signal": ("signal", ("SIGSEGV (segmentation fault)",), True),
    "exit_code": ("exit_code", ("exited with code 3",), False),
    "collective_timeout": ("collective_timeout", ("rank 1 never reached it",), True),
    "time_limit": ("time_limit", ("time limit (00:01:00)",), True),
    "warned_stop": ("time_limit", ("stopped at the time limit's warning", " of 300"), True),
    "cancelled": ("cancelled", ("cancelled by root (uid 0)",), True),
    "completed": ("completed", ("completed",), True),
}


def _sacct(case: Path) -> accounting.Accounting:
    data = json.loads((case / "sacct.json").read_text())
    recorded = Result(tuple(data["argv"]), data["returncode"], data["stdout"], data["stderr"])
    # The recording answers the very command the client asks (job ids aside).
    check_replay(accounting.argv("1"), recorded)
    return accounting.parse_accounting(data["stdout"])


def _evidence(case: Path) -> Evidence:
    findings = [f for name in ("stdout.log", "stderr.log") if (case / name).is_file()
                for f in scan((case / name).read_text(), name)]
    metrics = (json.loads((case / "metrics.json").read_text())
               if (case / "metrics.json").is_file() else None)
    return Evidence(job_id="1", accounting=_sacct(case), findings=tuple(findings),
                    metrics=metrics, user_names={0: "root (uid 0)"})


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_recorded_job_gets_its_diagnosis(slurm: Path, case: str) -> None:
    cause, words, certain = EXPECTED[case]
    got = diagnose(_evidence(slurm / case))
    assert got.cause == cause, got
    for w in words:
        assert w in got.summary, got.summary
    assert got.certain == certain and got.fix and got.evidence


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
def test_every_case_of_the_set_is_expected(slurm: Path) -> None:
    assert sorted(p.name for p in slurm.iterdir() if p.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
def test_accounting_keeps_runs_steps_and_measures(slurm: Path) -> None:
    acct = _sacct(slurm / "time_limit")
    assert [r.state.value for r in acct.runs] == ["TIMEOUT"] and acct.last is not None
    assert acct.last.time_limit_s == 60 and acct.last.elapsed_s and acct.last.elapsed_s >= 60
    names = {s.name for s in acct.steps()}
    assert {"batch", "hpctrain-monitor"} <= names
    assert any(s.max_rss_mb for s in acct.steps())  # "22360K" and the like, in MiB
    cancelled = _sacct(slurm / "cancelled").last
    assert cancelled is not None and cancelled.cancelled_by_uid == 0


def test_sizes_and_cpu_times_as_sacct_writes_them() -> None:
    assert accounting.size_mb("22360K") == pytest.approx(21.84, abs=0.01)
    assert accounting.size_mb("2000M") == 2000 and accounting.size_mb("1.5G") == 1536
    assert accounting.size_mb("") is None and accounting.size_mb("junk") is None
    assert accounting.cpu_seconds("00:00.551") == pytest.approx(0.551)
    assert accounting.cpu_seconds("1-02:03:04") == 93784
    assert accounting.cpu_seconds("01:02:03") == 3723


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
def test_a_finished_run_is_told_its_time_was_too_long(slurm: Path) -> None:
    ev = _evidence(slurm / "completed")
    notes = {a.what: a for a in advise(ev.accounting, None)}
    assert notes["time"].suggestion is not None and "`--time 00:05:00`" in notes["time"].suggestion


# Published output of what a CPU cluster cannot produce, diagnosed on a real failed job's
# accounting (the recorded exception case: FAILED, exit 1).
@pytest.mark.parametrize(("name", "cause", "words"), [
    ("cuda-oom-torch-2.log", "cuda_oom", "tried to allocate 22.00 MiB"),
    ("cuda-oom-torch-1.log", "cuda_oom", "tried to allocate 2.87 GiB"),
    ("nccl-watchdog.log", "collective_timeout", "a collective operation timed out"),
    ("slurm-oom-kill.log", "host_memory", "ran out of host memory"),
    ("ecc-accelerate.log", "gpu_fault", "failed: uncorrectable ECC error; not the job's code"),
    ("watchdog-launch-failure.log", "gpu_fault", "unspecified launch failure"),
    ("nccl-unknown-error.log", "gpu_fault", "failed on DESKTOP-1CE5APL: CUDA unknown error"),
    ("xid-79.log", "gpu_fault", "failed: Xid 79 (GPU fell off the bus)"),
])
def test_published_output_of_gpu_and_memory_failures(name: str, cause: str, words: str) -> None:
    if not SETS:
        pytest.fail("no recorded SLURM set: run tests/diagnosis/recorded/record.py")
    findings = tuple(scan((RECORDED / "published" / name).read_text(), name))
    got = diagnose(Evidence(job_id="1", accounting=_sacct(SETS[0] / "exit_code"),
                            findings=findings))
    assert got.cause == cause and words in got.summary, got
    assert any(name in e for e in got.evidence)


def test_ranks_and_nodes_are_named_in_the_evidence() -> None:
    text = (RECORDED / "published" / "nccl-watchdog.log").read_text()
    ranks = [f.rank for f in scan(text, "x.log")]
    assert ranks == ["1", "0"]
    oom = scan((RECORDED / "published" / "slurm-oom-kill.log").read_text(), "y.log")
    killed = [f for f in oom if f.task]
    assert [(f.kind, f.node, f.task) for f in killed] == [("host_oom", "nid001277", "1-3")]


def test_a_gpu_fault_is_told_from_the_codes_own_cuda_errors() -> None:
    """A device-side assert or an illegal address is the code's; a GPU's failure is not, and
    the watchdog's "[Rank 1]" or NCCL's host prefix says whose it was."""
    faults = scan((RECORDED / "published" / "watchdog-launch-failure.log").read_text(), "w.log")
    assert [(f.kind, f.rank, f.info["what"]) for f in faults] == [
        ("gpu_fault", "1", "unspecified launch failure")]
    nccl = scan((RECORDED / "published" / "nccl-unknown-error.log").read_text(), "n.log")
    assert [(f.kind, f.node) for f in nccl] == [("gpu_fault", "DESKTOP-1CE5APL")]
    code = ("Traceback (most recent call last):\n"
            '  File "/home/me/train.py", line 3, in <module>\n'
            "RuntimeError: CUDA error: device-side assert triggered\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert [f.kind for f in scan(code, "c.log")] == ["exception"]


def test_a_gpu_fault_names_the_one_node_whose_task_exited_with_an_error() -> None:
    text = ((RECORDED / "published" / "ecc-accelerate.log").read_text()
            + "srun: error: gpu2: task 3: Exited with exit code 1\n"
            "srun: error: gpu1: tasks 0-2: Killed\n")
    got = diagnose(Evidence(job_id="1", accounting=_sacct(SETS[0] / "exit_code"),
                            findings=tuple(scan(text, "e.log"))))
    assert got.cause == "gpu_fault" and "failed on gpu2" in got.summary, got.summary
    assert "hpctrain keeps gpu2 out of your next submits" in got.fix


def test_line_numbers_hold_with_progress_bars_and_other_line_breaks() -> None:
    text = ("Epoch 1:  10%|#   \r Epoch 1: 100%|##########\x0c\n"
            "Traceback (most recent call last):\n"
            '  File "/home/me/proj/train.py", line 7, in <module>\n'
            "ValueError: bad shape\n"
            "srun: error: node1: task 0: Exited with exit code 1\n")
    found = scan(text, "log", first_line=101)
    assert [(f.kind, f.line_no) for f in found] == [("exception", 104), ("task_exit", 105)]
    frame = found[0].user_frame()
    assert frame is not None and (frame.file, frame.line) == ("/home/me/proj/train.py", 7)


def test_every_reason_has_its_few_words_and_its_plain_meaning() -> None:
    from hpctrain.diagnosis.pending import REASONS, SHORT, short_reason

    assert set(SHORT) == set(REASONS)
    assert short_reason("QOSMaxGRESPerUser") == "a QOS limit reached"
    assert short_reason("AssocGrpGRES") == "an account limit reached"
    assert short_reason("SomethingNew") == ""


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
@pytest.mark.parametrize(("case", "words"), [
    ("exception", "ZeroDivisionError: division by zero"), ("import_error",
    "no module nosuchmodule_for_why"), ("missing_file", "no file data/train.csv"),
    ("signal", "SIGSEGV"), ("exit_code", "exit 3"), ("time_limit", "time limit"),
    ("warned_stop", "time limit at epoch "), ("cancelled", "cancelled by root (uid 0)"),
    ("completed", ""), ("collective_timeout", "a collective timed out"),
])
def test_each_verdict_has_its_headline(slurm: Path, case: str, words: str) -> None:
    got = diagnose(_evidence(slurm / case)).headline
    assert got.startswith(words) if words else got == ""


@pytest.mark.parametrize("slurm", SETS, ids=lambda p: p.name)
def test_cpu_and_gpu_advice_on_recorded_measures(slurm: Path, tmp_path: Path) -> None:
    from hpctrain.diagnosis.advice import CPU_EFFICIENCY_LOW, GPU_UTIL_LOW_PCT
    from hpctrain.monitor.stats import job_summary

    # A real H100 node's monitor rows (tests/monitor/recorded), summarized as a job's are.
    (tmp_path / "monitor").mkdir()
    h100 = Path(__file__).resolve().parents[1] / "monitor" / "recorded" / "h100-node.jsonl"
    (tmp_path / "monitor" / "gpu-node.jsonl").write_text(h100.read_text())
    monitor = job_summary(tmp_path)
    assert monitor is not None and monitor["gpu_util_mean_pct"] is not None
    # The time-limit job: 74 s on 2 CPUs that slept.
    acct = _sacct(slurm / "time_limit")
    notes = {a.what: a for a in advise(acct, monitor)}
    last = acct.last
    assert last is not None and last.total_cpu_s is not None and last.elapsed_s and last.cpus
    busy = last.total_cpu_s / (last.elapsed_s * last.cpus)
    assert (notes["CPU efficiency"].suggestion is not None) == (busy < CPU_EFFICIENCY_LOW)
    assert busy < CPU_EFFICIENCY_LOW and "fewer CPUs" in str(notes["CPU efficiency"].suggestion)
    gpu_mean = monitor["gpu_util_mean_pct"]
    assert (notes["GPU utilisation"].suggestion is not None) == (gpu_mean < GPU_UTIL_LOW_PCT)
    assert notes["GPU utilisation"].used == f"{gpu_mean:.0f} % on average"
    # The H100 node's rows peak at 1319 of 81559 MiB: a larger batch fits.
    assert notes["GPU memory"].used == "at most 1319 MiB (2%)"
    assert "larger batch per GPU" in str(notes["GPU memory"].suggestion)
    # Host memory exhausted, where SLURM measured no peak: the monitor's node peak is named.
    oom = tuple(scan((RECORDED / "published" / "slurm-oom-kill.log").read_text(), "oom.log"))
    got = diagnose(Evidence(job_id="1", accounting=_sacct(slurm / "exit_code"), findings=oom,
                            monitor=monitor))
    assert got.cause == "host_memory" and "memory peaked at" in got.summary, got.summary
    assert "in the monitor's samples" in got.summary
    # Too short a run is not judged: the exception case ran a second or two.
    assert "CPU efficiency" not in {a.what for a in advise(_sacct(slurm / "exception"), None)}


@pytest.mark.parametrize(("name", "kinds", "file", "line"), [
    # srun reported the task's exit between a frame and its source line ...
    ("import_error.err", ["task_exit", "import_error", "monitor"], "/code/pkg/imp.py", 2),
    # ... and right after "Traceback (most recent call last):".
    ("missing_file.err", ["task_exit", "missing_file", "task_signal", "monitor"],
     "/code/pkg/miss.py", 1),
])
def test_a_traceback_with_sruns_lines_written_into_it_stays_whole(
        name: str, kinds: list[str], file: str, line: int) -> None:
    found = scan((RECORDED / "interleaved" / name).read_text(), "job.err")
    assert [f.kind for f in found] == kinds
    frame = found[1].user_frame()
    assert frame is not None and frame.file.endswith(file) and frame.line == line

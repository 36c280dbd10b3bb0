"""A job's overview (monitor summary, start-up, attempts) read from its run directory, and the
copy of those files a login sends in one round trip: its command run here by a real sh and GNU
tar (what a login runs), its answer unpacked. The same over a real sshd and the dev cluster:
tests/remote/test_remote_cluster.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hpctrain.errors import RemoteError
from hpctrain.places import LocalPlace, together
from hpctrain.places.loginfiles import pack_command, pack_input, unpack
from hpctrain.tracking import overview
from hpctrain.values.attempts import Attempt
from hpctrain.values.rundir import OVERVIEW, RunDir

# Every way a path could leave its quotes: a quote, spaces, $(), backticks, ;, a leading -.
HOSTILE = "-run it's $(touch pwned) `touch pwned`; x"
SAMPLE = {"kind": "sample", "t": 1.0, "node": "node1", "span_s": 1.0, "cpu_pct": 50.0,
          "mem_used_mib": 100.0, "mem_total_mib": 1000.0, "gpus": [], "self_cpu_s": 0.1}
MARK = {"t": 2.0, "mark": "job started", "node": "node1", "rank": None, "job": "7", "restart": 0}
ATTEMPTS = "".join(Attempt(n, "7", 1.0 + n, 5.0 + n, 1, "a rank exited with code 1", then).line()
                   for n, then in ((0, "restart"), (1, "gave up")))


def _run_dir(root: Path) -> Path:
    run = root / HOSTILE
    rd = RunDir(run)
    rd.monitor_dir.mkdir(parents=True)
    (rd.monitor_dir / "node1.jsonl").write_text(json.dumps(SAMPLE) + "\n" + '{"t": 3, "no')
    rd.startup_dir.mkdir()
    (rd.startup_dir / "node1-batch.jsonl").write_text(json.dumps(MARK) + "\n")
    rd.attempts.write_text(ATTEMPTS)
    rd.metrics.write_text("{}")  # not part of the overview: not copied
    return run


def _answer(run: Path, cwd: Path, names: tuple[str, ...] = OVERVIEW) -> tuple[bytes, int]:
    # A login's start-up files may print before the answer: the copy is found after its mark.
    done = subprocess.run(["sh", "-c", "echo 'Welcome to the cluster'; " + pack_command(run)],
                          cwd=cwd, input=pack_input(names), capture_output=True, timeout=30,
                          check=False)
    return done.stdout, done.returncode


def test_the_copy_holds_exactly_the_overviews_files_of_a_hostile_path(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    out, code = _answer(run, tmp_path)
    assert code == 0 and not (tmp_path / "pwned").exists()
    into = tmp_path / "copy"
    into.mkdir()
    unpack(out, into)
    assert sorted(str(p.relative_to(into)) for p in into.rglob("*")) == [
        "attempts.jsonl", "monitor", "monitor/node1.jsonl", "startup",
        "startup/node1-batch.jsonl"]
    assert overview.read(into, "7", str(run)) == overview.read(run, "7")


def test_the_overview_of_a_run_directory(tmp_path: Path) -> None:
    got = overview.read(_run_dir(tmp_path), "7", "login:/the/run")
    assert got.monitor is not None and got.monitor["run_dir"] == "login:/the/run"
    assert [n["node"] for n in got.monitor["nodes"]] == ["node1"]
    assert got.startup is not None and got.startup.job == "7"
    assert [a["attempt"] for a in got.attempts] == [0, 1]
    assert overview.read(_run_dir(tmp_path / "b"), "8").attempts == []


@pytest.mark.parametrize("exists", [False, True])
def test_nothing_there_yet_is_an_empty_copy(tmp_path: Path, exists: bool) -> None:
    run = tmp_path / "run"
    if exists:
        run.mkdir()
    out, code = _answer(run, tmp_path)
    assert code == 0
    unpack(out, tmp_path)
    empty = overview.read(run if exists else tmp_path / "none", "7")
    assert empty == overview.Overview(None, None, [])


def test_a_link_or_a_path_outside_from_the_login_is_left_out(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "startup").mkdir(parents=True)
    (tmp_path / "secret").write_text("outside")
    (run / "startup" / "link.jsonl").symlink_to(tmp_path / "secret")
    (run / "attempts.jsonl").write_text("")
    out, _ = _answer(run, tmp_path)
    into = tmp_path / "copy"
    into.mkdir()
    unpack(out, into)
    assert not (into / "startup" / "link.jsonl").exists()
    assert (into / "attempts.jsonl").is_file()


def test_a_cut_answer_is_a_clear_error(tmp_path: Path) -> None:
    out, _ = _answer(_run_dir(tmp_path), tmp_path)
    with pytest.raises(RemoteError, match="unreadable"):
        unpack(out[: len(out) // 2], tmp_path / "copy")


def test_this_machine_reads_the_run_directory_in_place(tmp_path: Path) -> None:
    with LocalPlace().readable(tmp_path, OVERVIEW) as readable:
        assert readable == tmp_path


def test_any_name_and_thousands_of_them_come_over(tmp_path: Path) -> None:
    # A sweep report asks for each point's metrics: names on stdin, never options or words.
    study = tmp_path / "study"
    named = ["-n", "--to-stdout", "a b", "it's $(touch pwned)", "line\nbreak", "points/000/m"]
    for name in named:
        (study / name).parent.mkdir(parents=True, exist_ok=True)
        (study / name).write_text(name)
    missing = [f"points/{n:04d}/metrics.json" for n in range(5000)]
    out, code = _answer(study, tmp_path, (*named, *missing))
    assert code == 0 and not (tmp_path / "pwned").exists()
    into = tmp_path / "copy"
    into.mkdir()
    unpack(out, into)
    assert all((into / name).read_text() == name for name in named)
    assert not (into / "points" / "0000").exists()


def test_a_studys_files_read_together(tmp_path: Path) -> None:
    points = [tmp_path / "study" / "points" / f"{n:03d}" for n in range(3)]
    for p in points[:2]:
        p.mkdir(parents=True)
        (p / "metrics.json").write_text(p.name)
    (tmp_path / "elsewhere").write_text("asked later")
    with together.reading(LocalPlace(), [p / "metrics.json" for p in points]) as read:
        assert [read(p / "metrics.json") for p in points] == [b"000", b"001", None]
        assert read(tmp_path / "elsewhere") == b"asked later"
    with together.reading(LocalPlace(), []) as read:
        assert read(tmp_path / "elsewhere") == b"asked later"


def test_an_ended_jobs_monitor_is_its_written_summary(tmp_path: Path) -> None:
    # A week's samples are megabytes: the summary the job wrote as it ended stands for them.
    run = _run_dir(tmp_path)
    sampled = overview.read(run, "7", ended=True).monitor
    assert sampled is not None and [n["node"] for n in sampled["nodes"]] == ["node1"]
    written = {**sampled, "nodes": [{**sampled["nodes"][0], "node": "written"}],
               "ranks": {"0": "node1"}}
    RunDir(run).monitor_summary.write_text(json.dumps(written))
    got = overview.read(run, "7", "login:/run", ended=True).monitor
    assert got is not None and [n["node"] for n in got["nodes"]] == ["written"]
    assert "ranks" not in got and got["run_dir"] == "login:/run"
    # A running job's (a requeued one's summary is its last segment's): the samples.
    assert overview.read(run, "7").monitor == {**sampled, "run_dir": str(run)}

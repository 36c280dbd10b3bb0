"""A researcher's own script in a sweep (issue 52): a swept name the command does not take is
refused at plan time with the command to write; the plan lists points by their swept values;
progress.log_metrics writes the metrics.json that sweep-report ranks by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain import progress
from hpctrain.errors import HpctrainError
from hpctrain.history import History, StateUpdate, StudyRecord
from hpctrain.plan import sweep as points_of
from hpctrain.plan.sweep import Sweep
from hpctrain.studies import sweep_report as report
from tests.jobs.helpers import new_job
from tests.unit.inproc import Cli, in_process

LR = Sweep("grid", ((("lr", "0.1"),), (("lr", "0.03"),)), ("lr",))
LR_SEED = points_of.grid(["optim.lr=0.1,0.03", "seed=1,2"])


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Cli:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.chdir(tmp_path)
    return in_process(monkeypatch, capsys)


@pytest.mark.parametrize(("command", "sweep", "what", "fix"), [
    # The newcomer's friction 2: argparse would refuse the appended `lr=0.1`.
    (("python", "train.py", "--epochs", "3"), LR, "takes --flags (--epochs) and has no {lr}",
     "-- python train.py --epochs 3 --lr {lr}"),
    (("torchrun", "--nproc-per-node", "2", "train.py", "--epochs", "3"), LR, "no {lr}",
     "-- torchrun --nproc-per-node 2 train.py --epochs 3 --lr {lr}"),
    (("python", "-m", "mypkg.train", "--epochs=3"), LR_SEED, "no {optim.lr}, {seed}",
     "-- python -m mypkg.train --epochs=3 --lr {optim.lr} --seed {seed}"),
    # A swept flag also written literally: the point's value would be shadowed or doubled.
    (("python", "train.py", "--lr", "0.1", "--epochs", "3"), LR, "sets --lr 0.1 itself",
     "-- python train.py --lr {lr} --epochs 3"),
    (("python", "train.py", "--lr=0.1", "--lr", "{lr}"), LR, "sets --lr=0.1 itself",
     "remove `--lr=0.1`"),
    (("python", "train.py", "lr=0.2"), LR, "sets lr=0.2 itself", "lr={lr}"),
    (("python", "train.py", "--batch-size", "8", "--lr", "{optim.lr}"),
     points_of.grid(["optim.lr=1,2", "trainer.batch_size=8,16"]), "sets --batch-size 8",
     "--batch-size {trainer.batch_size} --lr {optim.lr}"),
    # A placeholder for one swept key but not the other: those points would run alike.
    (("python", "train.py", "--lr", "{optim.lr}"), LR_SEED, "varies seed, which the command "
     "has no placeholder for", "-- python train.py --lr {optim.lr} --seed {seed}"),
])
def test_a_swept_name_the_command_does_not_take_is_refused_with_the_command_to_write(
        command: tuple[str, ...], sweep: Sweep, what: str, fix: str) -> None:
    with pytest.raises(HpctrainError) as e:
        points_of.check_command(command, sweep)
    assert what in e.value.what, e.value.what
    assert fix in (e.value.fix or ""), e.value.fix


@pytest.mark.parametrize("command", [
    ("python", "train.py", "--epochs", "3", "--lr", "{lr}"),
    ("python", "train.py", "--lr={lr}", "--warmup-lr", "0.1"),
    # Hydra's overrides beside its own options, and a shell that reads its positionals.
    ("python", "train.py", "--config-name", "big", "trainer.epochs=3"),
    ("python", "train.py", "--multirun"),
    ("bash", "-c", 'echo "$1"', "point"),
    ("hpctrain", "train", "--task", "spiral", "--max-epochs", "2"),
])
def test_a_command_that_takes_the_swept_values_is_accepted(command: tuple[str, ...]) -> None:
    assert points_of.check_command(command, LR) == ()


def test_a_bare_command_gets_the_values_appended_and_a_note_says_how() -> None:
    (note,) = points_of.check_command(("python", "train.py"), LR)
    assert "lr=0.1, Hydra's syntax" in note and "-- python train.py --lr {lr}" in note


def test_the_dry_run_refuses_the_newcomers_sweep_in_one_error_line(cli: Cli) -> None:
    r = cli("sweep", "-P", "local", "--grid", "lr=0.1,0.03", "--dry-run", "--",
            "python", "train.py", "--epochs", "3")
    assert r.code == 1 and "Traceback" not in r.err
    assert "Error: the command takes --flags (--epochs) and has no {lr}" in r.err
    assert "-- python train.py --epochs 3 --lr {lr}" in r.err


def test_the_plan_lists_each_point_by_its_swept_names_and_values(cli: Cli) -> None:
    r = cli("sweep", "-P", "local", "--grid", "optim.lr=0.2,0.1", "--grid", "tag=a b,c",
            "--dry-run", "--", "python", "train.py", "--lr", "{optim.lr}", "--epochs", "8",
            "--tag", "{tag}")
    assert r.code == 0, r.err
    assert "point 0: optim.lr=0.2 tag='a b'" in r.err
    assert "point 1: optim.lr=0.2 tag=c" in r.err
    assert "--epochs 8" not in r.err.split("point 0:")[1].splitlines()[0]


def test_log_metrics_writes_rank_0_s_metrics_file_atomically(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.json"
    log = progress.MetricsLog(path, now=100.0)
    log.log(0, 3, {"loss": 2.0}, now=110.0)
    log.log(0, 3, {"val_loss": 2.5}, now=111.0)
    log.log(1, 3, {"loss": 1.0, "val_loss": None}, now=120.0)
    data = json.loads(path.read_text())
    assert data["epochs"] == [
        {"epoch": 0, "metrics": {"loss": 2.0, "val_loss": 2.5}, "time_s": 11.0},
        {"epoch": 1, "metrics": {"loss": 1.0, "val_loss": None}, "time_s": 9.0}]
    assert (data["epochs_completed"], data["max_epochs"], data["status"]) == (2, 3, "running")
    assert data["final_loss"] == 1.0 and data["logged_metrics"] == ["loss", "val_loss"]
    assert data["wall_time_s"] == 20.0
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
    # A requeued run goes on from the file: a later attempt redoing epoch 1 replaces it.
    again = progress.MetricsLog(path, now=200.0)
    again.log(1, 3, {"loss": 0.9}, now=205.0)
    again.log(2, 3, {"loss": 0.5}, now=206.0)
    data = json.loads(path.read_text())
    assert [e["metrics"]["loss"] for e in data["epochs"]] == [2.0, 0.9, 0.5]
    assert data["status"] == "completed" and data["final_loss"] == 0.5
    assert data["wall_time_s"] == 26.0


def test_log_metrics_is_rank_0_s_and_a_no_op_outside_a_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_metrics", None)
    monkeypatch.setattr(progress, "_metrics_off", False)
    monkeypatch.setenv("HPCTRAIN_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "1")
    progress.log_metrics(0, loss=1.0)
    assert not (tmp_path / "metrics.json").exists()
    monkeypatch.setattr(progress, "_metrics_off", False)
    monkeypatch.setenv("RANK", "0")
    progress.log_metrics(0, max_epochs=1, loss=float("nan"), acc=1)
    data = json.loads((tmp_path / "metrics.json").read_text())
    assert data["epochs"][0]["metrics"] == {"loss": None, "acc": 1.0}
    with pytest.raises(TypeError, match="acc='high' is not a number"):
        progress.log_metrics(1, acc="high")


def test_sweep_report_ranks_a_script_s_points_by_its_own_metric(
        tmp_path: Path, history: History) -> None:
    study = history.add_study(StudyRecord(name="own", profile="local", mode="grid",
                                          directory=str(tmp_path), runs=[], kind="sweep"))
    jobs = history.add_all([new_job(f"7_{t}", study=study.id,
                                    run_dir=str(tmp_path / "points" / f"{t:03d}"))
                            for t in range(2)])
    history.update([StateUpdate(id=r.id, state="COMPLETED", terminal=True, stale=False,
                                exit_code=0) for r in jobs])
    for t, losses in enumerate([[3.0, 2.0], [2.5, 0.5]]):
        log = progress.MetricsLog(tmp_path / "points" / f"{t:03d}" / "metrics.json", 0.0)
        log.path.parent.mkdir(parents=True)
        for epoch, loss in enumerate(losses):
            log.log(epoch, 2, {"loss": loss, "acc": 1 - loss / 4}, now=1.0 + epoch)
    info = {"points": [{"lr": "0.01"}, {"lr": "0.1"}], "keys": ["lr"]}
    points = history.study_jobs(study.id or 0)

    def read(path: Path) -> bytes | None:
        return path.read_bytes() if path.exists() else None

    for given, metric, mode in [(None, "loss", "min"), ("final_loss:min", "loss", "min"),
                                ("final_loss", "loss", "min"), ("acc", "acc", "max")]:
        data = report.report_data(study, points, info, read, given)
        assert (data["metric"], data["mode"]) == (metric, mode)
        assert data["best"]["point"] == 1 and data["best"]["settings"] == {"lr": "0.1"}
    data = report.report_data(study, points, info, read, "final_loss")
    assert [r["final"] for r in data["points"]] == [2.0, 0.5]
    assert data["points"][0]["epochs"] == 2 and data["logged_metrics"] == ["loss", "acc"]

"""--first-of without a cluster: parsing, planning as values, history, status rows, estimates."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app, jobs
from hpctrain.cli.jobview import one_row_per_chain, plain_table
from hpctrain.errors import HpctrainError, PlanError
from hpctrain.history import MIGRATIONS, History, StateUpdate
from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.slurm import starts
from hpctrain.slurm.runner import Result
from hpctrain.slurm.testonly import parse_test_only
from hpctrain.submission import race as alt
from hpctrain.tracking import races, selection
from hpctrain.values.rundir import RunDir
from tests.jobs.helpers import ReplayClient, here, track
from tests.recorded import SLURM

# The set recorded from the dev cluster's SLURM (see its MANIFEST.json for each file's origin).
RECORDED = Path(__file__).resolve().parent / "recorded" / SLURM
runner = CliRunner()


def recording(name: str, slurm: str = SLURM) -> Result:
    data = json.loads((RECORDED.parent / slurm / f"{name}.json").read_text())
    return Result(tuple(data["argv"]), data["returncode"], data["stdout"], data["stderr"])


def test_first_of_parses_shapes() -> None:
    shapes = alt.parse_first_of("1x4, 4X1 ,2x2")
    assert [s.label for s in shapes] == ["1x4", "4x1", "2x2"]


@pytest.mark.parametrize("text", ["1x4", "1x4,1x4", "0x1,1x1", "1x4,", "1x4;rm -rf /,2x2",
                                  "$(id)x1,1x1", "-1x2,1x1", "1x2," * 9 + "1x1", "１x2,1x1"])
def test_first_of_refuses_bad_lists(text: str) -> None:
    with pytest.raises(HpctrainError) as e:
        alt.parse_first_of(text)
    assert "--first-of" in e.value.what and e.value.fix


def test_first_of_alternatives_may_name_their_partition(tmp_path: Path) -> None:
    alts = alt.parse_first_of("gpu:2x4, gpudev:1x4,1x4")
    assert [(a.partition, a.shape.label, a.label) for a in alts] == [
        ("gpu", "2x4", "gpu:2x4"), ("gpudev", "1x4", "gpudev:1x4"), (None, "1x4", "1x4")]
    for bad in ("gpu:1x4,gpu:1x4", "a b:1x4,1x1", "$(id):1x4,1x1", ";:1x4,1x1"):
        with pytest.raises(HpctrainError):
            alt.parse_first_of(bad)
    raven = JobRequest(profile=load_profile("raven"), command=("hostname",), time="10")
    race = alt.prepare_race(raven, alts[:2], tmp_path, environ={})
    assert [(p.plan.partition, p.plan.nodes, p.script_name) for p in race.alternatives] == [
        ("gpu", 2, "job-gpu-2x4.sbatch"), ("gpudev", 1, "job-gpudev-1x4.sbatch")]
    # gpudev takes one node at most: that alternative is refused, named by its label.
    with pytest.raises(PlanError) as e:
        alt.prepare_race(raven, alt.parse_first_of("gpu:2x4,gpudev:2x4"), tmp_path, environ={})
    assert [p.split(":")[0:2] for p in e.value.problems][0] == ["gpudev", "2x4"]


def request(**kw: object) -> JobRequest:
    return JobRequest(profile=load_profile("local"), command=("hostname",), **kw)  # type: ignore[arg-type]


def test_prepare_race_shares_one_run_dir_with_a_script_each(tmp_path: Path) -> None:
    race = alt.prepare_race(request(job_name="it's; $(x)"), alt.parse_first_of("1x2,2x1"),
                            tmp_path, environ={})
    assert len({p.run_dir for p in race.alternatives}) == 1
    assert [p.script_name for p in race.alternatives] == ["job-1x2.sbatch", "job-2x1.sbatch"]
    assert [(p.plan.nodes, p.plan.gpus_per_node) for p in race.alternatives] == [(1, 2), (2, 1)]
    for prep in race.alternatives:
        assert f"this is the {prep.plan.race}" in prep.script
        assert 'mkdir "$hpctrain_claim"' in prep.script
        subprocess.run(["bash", "-n"], input=prep.script, text=True, check=True)
    names = sorted(f.path.name for f in race.files())
    # One request for the run (the first alternative's; a rerun gives it its own topology).
    assert names == ["job-1x2.sbatch", "job-2x1.sbatch", "profile.yaml", "request.json"]
    assert not race.run_dir.exists()


def test_a_plain_job_has_no_claim_block(tmp_path: Path) -> None:
    from hpctrain.submission.prepare import prepare

    assert "race-claim" not in prepare(request(), tmp_path, environ={}).script


def test_impossible_alternatives_are_all_listed(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as e:
        alt.prepare_race(request(), alt.parse_first_of("1x3,2x1,9x1"), tmp_path, environ={})
    lines = e.value.problems
    assert any(p.startswith("1x3: ") for p in lines) and any(p.startswith("9x1: ") for p in lines)
    assert not any(p.startswith("2x1: ") for p in lines)


def test_chain_and_first_of_do_not_mix() -> None:
    with pytest.raises(HpctrainError, match="--chain"):
        alt.race_requests(request(chain=2), alt.parse_first_of("1x1,2x1"))


def test_render_first_of_json_has_each_alternative() -> None:
    r = runner.invoke(app, ["render", "-P", "local", "--first-of", "1x2,2x1", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert [a["topology"] for a in data["alternatives"]] == ["1x2", "2x1"]
    assert [a["plan"]["nodes"] for a in data["alternatives"]] == [1, 2]
    assert all("race-claim" in a["script"] for a in data["alternatives"])


def test_render_first_of_refuses_output(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "hpctrain", "render", "-P", "local",
                        "--first-of", "1x2,2x1", "-o", str(tmp_path / "x.sh")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 1 and "Error: --output and --first-of" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.sh").exists()


def test_test_only_estimates_from_recorded_answers() -> None:
    now = starts.parse_test_only(recording("test_only_now").stderr)
    assert now == starts.StartEstimate("2026-11-24T04:28:11", 2, "node[1-2]", "debug")
    wait = parse_test_only(recording("test_only_wait")).estimate
    assert wait == starts.StartEstimate("2026-11-24T04:33:10", 1, "node1", "debug")
    refused = parse_test_only(recording("test_only_refused"))
    assert not refused.accepted and refused.estimate is None


def test_describe_waits() -> None:
    at = datetime(2026, 11, 23, 0, 33, 56)
    assert starts.describe("2026-11-23T00:33:58", at) == "now"
    assert starts.describe("2026-11-23T00:36:56", at) == "in 3 min (2026-11-23 00:36:56)"
    assert starts.describe("2026-11-23T03:00:00", at).startswith("in 2 h 27 min")
    assert starts.describe("2026-11-25T03:00:00", at).startswith("in 2 d 2 h")
    assert starts.describe(None, at) == "unknown"
    assert starts.describe("Unknown", at) == "Unknown"


def test_squeue_starts_ride_on_the_state_listing() -> None:
    """A queue query's squeue answers states as before and each job's expected start."""
    busy, pending = (recording(f"sbatch_{n}").stdout.strip() for n in ("busy", "pending"))
    client = ReplayClient({"squeue": recording("squeue_starts")})
    answer = client.queue([busy, pending])
    infos = answer.jobs
    assert infos[pending].reason == "Resources" and infos[busy].node_list == "node[1-2]"
    assert answer.starts == {pending: "2026-11-24T04:33:10", busy: "2026-11-24T04:28:10"}
    client.answers["squeue"] = recording("squeue_starts_unknown")
    assert client.queue([pending]).starts[pending] is None
    # An answer without the field (another recording, an older hpctrain) parses as before.
    text = "7|PENDING|0:00|5:00|1||Priority\n"
    assert starts.split_squeue_starts(text) == (text, {})


def test_squeue_json_starts_on_24_11(monkeypatch: pytest.MonkeyPatch) -> None:
    """SLURM 24.11 answers in JSON: the same starts, from epochs, in local time as %S."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        busy, pending = (recording(f"sbatch_{n}", "slurm-24.11").stdout.strip()
                         for n in ("busy", "pending"))
        client = ReplayClient({"squeue": recording("squeue_starts", "slurm-24.11")},
                              slurm="slurm-24.11")
        answer = client.queue([busy, pending])
        infos = answer.jobs
        assert infos[pending].reason == "Resources" and infos[busy].node_list == "node[1-2]"
        assert answer.starts == {busy: "2026-11-24T12:13:32", pending: "2026-11-24T12:18:32"}
        client.answers["squeue"] = recording("squeue_starts_unknown", "slurm-24.11")
        assert client.queue([pending]).starts[pending] is None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_migration_is_appended_once() -> None:
    names = [name for name, _ in MIGRATIONS]
    assert names.index("0005_alternatives") == 4 and len(set(names)) == len(names)


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "history.sqlite3")


def race_rows(history: History, run_dir: Path) -> list[selection.JobRecord]:
    return [*track(history, "40", run_dir=str(run_dir), race_head="40", race_of="1x2,2x1",
                   nodes=1, gpus_per_node=2),
            *track(history, "41", run_dir=str(run_dir), race_head="40", race_of="1x2,2x1",
                   nodes=2, gpus_per_node=1),
            *track(history, "42")]


def test_status_folds_a_race_into_its_winner(history: History, tmp_path: Path) -> None:
    rows = race_rows(history, tmp_path)
    assert [r.job_id for r in one_row_per_chain(rows)] == ["40", "42"]
    RunDir(tmp_path).race_claim.mkdir()
    (RunDir(tmp_path).race_claim / "winner").write_text("41 2x1\n")
    shown = one_row_per_chain(rows)
    assert [r.job_id for r in shown] == ["41", "42"]
    line = plain_table(shown).splitlines()[1]
    assert "[won of 1x2,2x1]" in line and " 2x1 " in line


def test_cancel_takes_every_alternative(history: History, tmp_path: Path) -> None:
    rows = race_rows(history, tmp_path)
    assert [r.job_id for r in selection.with_races(history, rows[1:2])] == ["40", "41"]
    assert [r.job_id for r in selection.with_races(history, rows[2:])] == ["42"]


def test_winner_ignores_a_garbled_claim(history: History, tmp_path: Path) -> None:
    (alternative, _, plain) = race_rows(history, tmp_path)
    RunDir(tmp_path).race_claim.mkdir()
    (RunDir(tmp_path).race_claim / "winner").write_bytes(b"\xff\xfe")
    assert selection.winner(alternative) is None
    assert selection.winner(dataclasses.replace(plain, run_dir=None)) is None


def _ran(history: History, rows: list[selection.JobRecord], *states: str) -> None:
    history.update([StateUpdate(id=r.id, state=s, terminal=s not in ("PENDING", "RUNNING"),
                                stale=False) for r, s in zip(rows, states, strict=True)])


def test_a_races_winner_is_learned_once_at_its_place_and_kept(history: History,
                                                              tmp_path: Path) -> None:
    # Over a login the claim is not on this disk: the history keeps what the place said.
    rows = race_rows(history, tmp_path)[:2]
    assert races.learn(history, rows, LocalPlace()) == rows  # both pending: nothing asked
    _ran(history, rows, "CANCELLED", "RUNNING")
    RunDir(tmp_path).race_claim.mkdir()
    (RunDir(tmp_path).race_claim / "winner").write_text("41 2x1\n")
    learned = races.learn(history, history.race(rows[0].cluster, "40"), LocalPlace())
    assert [r.race_winner for r in learned] == ["41 2x1", "41 2x1"]
    (RunDir(tmp_path).race_claim / "winner").unlink()
    assert selection.winner(history.race(rows[0].cluster, "40")[0]) == ("41", "2x1")
    assert selection.races_unlearned(history.race(rows[0].cluster, "40")) == []


def test_a_race_that_ended_unclaimed_is_not_asked_about_again(history: History,
                                                              tmp_path: Path) -> None:
    rows = race_rows(history, tmp_path)[:2]
    _ran(history, rows, "CANCELLED", "RUNNING")
    running = history.race(rows[0].cluster, "40")
    assert [r.race_winner for r in races.learn(history, running, LocalPlace())] == [None, None]
    _ran(history, rows, "CANCELLED", "FAILED")
    ended = races.learn(history, history.race(rows[0].cluster, "40"), LocalPlace())
    assert [r.race_winner for r in ended] == ["", ""]
    assert selection.races_unlearned(ended) == [] and selection.winner(ended[1]) is None


def test_dry_run_without_slurm_shows_the_plans_and_says_why_no_estimates(
        tmp_path: Path) -> None:
    env = {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home"),
           "SLURM_CONF": str(tmp_path / "no-slurm.conf")}
    r = subprocess.run([sys.executable, "-m", "hpctrain", "submit", "-P", "local", "--first-of",
                        "1x2,2x1", "--dry-run", "--json", "--", "hostname"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["dry_run"] and data["first_of"] == "1x2,2x1"
    assert [a["check"] for a in data["alternatives"]] == [None, None]
    assert [a["script"].rsplit("/", 1)[1] for a in data["alternatives"]] == [
        "job-1x2.sbatch", "job-2x1.sbatch"]
    assert "warning: no start estimates" in r.stderr
    assert not (tmp_path / "hpctrain-runs").exists()
    assert not (tmp_path / "home" / "state" / "history.sqlite3").exists()


def test_pending_rows_show_slurms_expected_start(history: History) -> None:
    (row,) = track(history, "50")
    later = (datetime.now() + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S")
    line = plain_table([row], {"50": later}).splitlines()[1]
    assert "start in 30 min (" in line or "start in 29 min (" in line
    assert "start" not in plain_table([row], {"50": None}).splitlines()[1].split("PENDING")[1]


def test_logs_and_stats_of_any_alternative_are_the_winners(history: History,
                                                           tmp_path: Path) -> None:
    race_rows(history, tmp_path)
    assert selection.pick(history, "40").job_id == "40"
    RunDir(tmp_path).race_claim.mkdir()
    (RunDir(tmp_path).race_claim / "winner").write_text("41 2x1\n")
    assert selection.pick(history, "40").job_id == "41"
    assert selection.pick(history, "42").job_id == "42"


def test_a_race_whose_ids_cannot_be_written_is_cancelled_and_removed(
        history: History, tmp_path: Path) -> None:
    from tests.jobs.helpers import recording as jobs_recording

    race = alt.prepare_race(request(), alt.parse_first_of("1x2,2x1"), tmp_path, environ={})

    def sbatch(argv: tuple[str, ...]) -> Result:
        # Something already holds the ids file's name: it cannot be written.
        RunDir(race.run_dir).alternatives.mkdir(exist_ok=True)
        return jobs_recording("sbatch_parsable")

    client = ReplayClient({"sbatch": sbatch, "scancel": jobs_recording("scancel_done")})
    with pytest.raises(HpctrainError) as e:
        alt.submit_race(race, here(client, tmp_path), history)
    assert "cannot write the race's job ids" in e.value.what
    assert "cancelled the held alternatives" in e.value.what
    assert [c[0] for c in client.calls] == ["sbatch", "sbatch", "scancel"]
    assert all("--hold" in c for c in client.calls[:2])
    assert not race.run_dir.exists() and history.all() == []


def test_first_of_alternatives_may_name_their_profile() -> None:
    alts = alt.parse_first_of("2x4@raven, gpudev:1x4@raven,1x2@gilbreth,1x1")
    assert [(a.profile, a.partition, a.label) for a in alts] == [
        ("raven", None, "2x4@raven"), ("raven", "gpudev", "gpudev:1x4@raven"),
        ("gilbreth", None, "1x2@gilbreth"), (None, None, "1x1")]
    assert alt.script_name("gpudev:1x4@raven") == "job-gpudev-1x4-raven.sbatch"
    from hpctrain.submission.race import is_across, legs

    assert {p: [a.label for a in g] for p, g in legs(alts, "local").items()} == {
        "raven": ["2x4@raven", "gpudev:1x4@raven"], "gilbreth": ["1x2@gilbreth"],
        "local": ["1x1"]}
    assert not is_across(alt.parse_first_of("1x1@local,2x1"), "local")
    for bad in ("1x1@,2x1", "1x1@a b,2x1", "1x1@$(id),2x1", "1x1@-x,2x1", "1x1@raven,1x1@raven"):
        with pytest.raises(HpctrainError):
            alt.parse_first_of(bad)
    with pytest.raises(HpctrainError) as e:
        from hpctrain.submission.kinds import submission

        submission(request(), "1x1,1x2@raven")
    assert "submit --first-of 1x1,1x2@raven --dry-run" in e.value.fix


def test_the_watcher_cancels_every_other_profile_once_one_started(tmp_path: Path) -> None:
    from hpctrain.history import StateUpdate
    from hpctrain.submission.crossrace import Watch, decide

    history = History(tmp_path / "h.sqlite3")
    a1, a2, b1 = track(history, "11", "12", "21")
    orders = Watch("1x1@a,2x1@a,1x1@b", (("a", (a1.id, a2.id)), ("b", (b1.id,))))
    assert Watch.from_json(orders.to_json()) == orders

    def now() -> dict[int, selection.JobRecord]:
        return {r.id: r for r in history.by_row_ids([a1.id, a2.id, b1.id])}

    waiting = decide(orders, now())
    assert (waiting.winner, waiting.losers, waiting.over) == (None, (), False)
    # b's job started; a's two are still waiting: both are cancelled.
    history.update([StateUpdate(b1.id, "RUNNING", False, False)])
    won = decide(orders, now())
    assert (won.winner, set(won.losers), won.over) == ("b", {a1.id, a2.id}, True)
    # a's first ended before b started (its in-script race, or a cancel): not cancelled.
    history.update([StateUpdate(a1.id, "CANCELLED", True, False)])
    assert decide(orders, now()).losers == (a2.id,)
    # Nobody started and everything ended: nothing left to watch.
    history.update([StateUpdate(b1.id, "CANCELLED", True, False),
                    StateUpdate(a2.id, "CANCELLED", True, False)])
    assert decide(orders, now()) == type(won)(None, (), True)


def test_a_login_that_cannot_be_asked_leaves_the_race_for_a_later_status(
        history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No master to the login (closed, expired): status lists what it knows, as without races.
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    rows = track(history, "40", "41", run_dir=str(tmp_path), race_head="40",
                 race_of="1x2,2x1", login="nowhere.invalid")
    _ran(history, rows, "CANCELLED", "RUNNING")
    listed = history.race(rows[0].cluster, "40")
    assert jobs._races_learned(history, listed, LocalPlace) == listed
    assert [r.race_winner for r in history.race(rows[0].cluster, "40")] == [None, None]

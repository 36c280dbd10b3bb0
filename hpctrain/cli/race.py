"""`--first-of 1x4,4x1` on render and submit: every alternative's plan, SLURM's start estimate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from hpctrain.cli.flags import Flags
from hpctrain.cli.output import Display, console, err_console, register_displays, result_json

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.plan import JobPlan
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.testonly import TestOnlyVerdict
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.race import Race, RaceSubmitted

FIRST_OF = Flags(("--first-of",), "Race the job as these topologies (NODESxGPUS, e.g. 1x4,4x1): "
                 "the first to start wins and cancels the others (docs/jobs.md).",
                 metavar="NxG,NxG,...")


def __getattr__(name: str) -> Any:
    # FirstOfOpt, the typer declaration, made when a command that click parses asks for it.
    if name == "FirstOfOpt":
        return Annotated[str | None, FIRST_OF.declaration()]
    raise AttributeError(name)


def verdict_dict(verdict: TestOnlyVerdict) -> dict[str, object]:
    """SLURM's answer to --test-only, with its start estimate, for --json."""
    from datetime import datetime

    from hpctrain.slurm.starts import describe, wait_seconds

    est = verdict.estimate
    now = datetime.now()
    return {"accepted": verdict.accepted, "message": verdict.message,
            "start": est.as_dict() if est else None,
            "wait_s": wait_seconds(est.start, now) if est else None,
            "starts": describe(est.start, now) if est else None}


def ask_slurm(scripts: Sequence[str], required: bool, client: SlurmClient | None = None
              ) -> list[TestOnlyVerdict] | None:
    """`sbatch --test-only` for each script (here, or through `client`); None (with a warning)
    if SLURM is out of reach and the caller can do without it."""
    from hpctrain.errors import SlurmUnavailableError
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.submission.race import ask_test_only

    client = client or SlurmClient.from_environment()
    try:
        return ask_test_only(client, scripts)
    except SlurmUnavailableError as e:
        if required:
            raise
        err_console.print(f"[yellow]warning:[/] no start estimates: {e}", highlight=False)
        return None


def _starts(verdict: TestOnlyVerdict | None) -> str:
    if verdict is None:
        return "-"
    if not verdict.accepted:
        return f"refused: {verdict.message.splitlines()[-1]}"
    data = verdict_dict(verdict)
    return f"{data['starts']} on {verdict.estimate.nodes}" if verdict.estimate else "accepted"


def show_alternatives(plans: Sequence[JobPlan], verdicts: Sequence[TestOnlyVerdict] | None
                      ) -> None:
    """One row per alternative (or a study's topology), on stderr: its shape and when SLURM
    would start it."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("TOPOLOGY", "GPUS", "PARTITION", "CPUS/NODE", "MEM/NODE", "TIME",
                "SLURM EXPECTS IT TO START"):
        t.add_column(col)
    for i, p in enumerate(plans):
        t.add_row(p.race or f"{p.nodes}x{p.gpus_per_node}", str(p.total_gpus),
                  escape(p.partition), str(p.cpus_per_node), f"{p.mem_mb} MB", p.time,
                  escape(_starts(verdicts[i] if verdicts else None)))
    err_console.print(t)
    for note in dict.fromkeys(n for p in plans for n in p.notes):
        err_console.print(f"[yellow]note:[/] {escape(note)}")


def render_dict(first_of: str | None, output: Path | None,
                jobs: Sequence[tuple[JobPlan, str, TestOnlyVerdict | None]]) -> dict[str, object]:
    """`render --json`, with --first-of or without: one alternative per topology."""
    return {"first_of": first_of, "written_to": str(output) if output is not None else None,
            "alternatives": [{"topology": p.race, "plan": p.summary(), "script": s,
                              "check": verdict_dict(v) if v is not None else None}
                             for p, s, v in jobs]}


def _verdicts(race: Race, place: Place) -> list[TestOnlyVerdict] | None:
    return ask_slurm([p.script for p in race.alternatives], required=False,
                     client=place.slurm_client())


def _race_dry_run(outcome: Outcome[Race, None], place: Place) -> None:
    """`submit --first-of --dry-run`: the alternatives with SLURM's estimates, on stderr."""
    race = outcome.prepared
    show_alternatives([p.plan for p in race.alternatives], _verdicts(race, place))


def _race_dry_run_json(outcome: Outcome[Race, None], place: Place) -> dict[str, object]:
    race = outcome.prepared
    verdicts = _verdicts(race, place)
    alternatives = [{**alt, "script_text": prep.script,
                     "check": verdict_dict(verdicts[i]) if verdicts else None}
                    for i, (alt, prep) in enumerate(zip(race.alternative_dicts(),
                                                        race.alternatives, strict=True))]
    return {**race.as_dict(), "alternatives": alternatives}


def _race_submitted(outcome: Outcome[Race, RaceSubmitted], place: Place) -> None:
    """The alternatives' job ids, the shared run directory and how to follow the run."""
    done = outcome.result
    assert done is not None  # shown once submitted
    head = done.jobs[0][1]
    alts = ", ".join(f"{topo} = job {job}" for topo, job, _ in done.jobs)
    console.print(f"Submitted a race of {len(done.jobs)} alternatives ({alts}) on cluster "
                  f"{done.cluster}; the first to start cancels the others", highlight=False)
    console.print(f"run directory: {done.run_dir}", highlight=False, soft_wrap=True)
    console.print(f"follow it:     hpctrain status {head}", highlight=False)
    console.print(f"               hpctrain logs {head}   (the winner's, once one started)",
                  highlight=False)
    console.print(f"cancel all:    hpctrain cancel {head}", highlight=False)


def _displays() -> dict[type, Display]:
    """A race's values (one profile's: a race across profiles is cli/display.py's)."""
    from hpctrain.submission.race import Race, RaceSubmitted

    return {Race: Display(_race_dry_run, _race_dry_run_json),
            RaceSubmitted: Display(_race_submitted, result_json)}


register_displays(_displays)

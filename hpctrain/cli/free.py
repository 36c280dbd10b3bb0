"""`hpctrain free`: where GPUs are free now, per profile and partition, and where a request
would start soonest (docs/queue.md).

Per profile: one round trip for the partitions' GPUs and queues (sinfo and squeue together),
then one `sbatch --test-only` per candidate (each partition that accepts the request, times
each topology of --first-of); through the profile's login, all over its one connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.options import job_option
from hpctrain.cli.output import console, plain_columns, print_json
from hpctrain.cli.race import FIRST_OF
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.profiles import Profile
    from hpctrain.slurm.availability import Availability, Window
    from hpctrain.slurm.usage import Usage


@dataclass(frozen=True)
class Candidate:
    """A profile, partition and topology `free` weighed: SLURM's answer or the plan's refusal."""

    profile: str
    partition: str
    topology: str
    verdict: dict[str, object] | None  # SLURM's answer (render --json's form)
    refused: str | None  # hpctrain's own refusal of the plan

    def sort_key(self) -> tuple[int, float]:
        wait = self.verdict.get("wait_s") if self.verdict else None
        if self.refused or not self.verdict or not self.verdict.get("accepted"):
            return (2, 0.0)
        return (0, float(wait)) if isinstance(wait, int | float) else (1, 0.0)

    def as_dict(self) -> dict[str, object]:
        return {"profile": self.profile, "partition": self.partition, "topology": self.topology,
                "refused": self.refused, "check": self.verdict}


# nodes, GPUs per node (None: default), partition, profile (None: each looked at)
Shape = tuple[int, int | None, str | None, str | None]


def _topologies(first_of: str | None, nodes: int, gpus: int | None) -> list[Shape]:
    """The request's shapes: --first-of's (each in its partition and profile, if it names
    them), else the one given, if any (GPUs None: the plan's default, as for submit)."""
    if first_of:
        from hpctrain.submission.race import parse_first_of

        return [(a.shape.nodes, a.shape.gpus_per_node, a.partition, a.profile)
                for a in parse_first_of(first_of)]
    return [] if nodes == 1 and gpus is None else [(nodes, gpus, None, None)]


def _candidate(profile: Profile, partition: str, shape: Shape, time: str | None,
               place: Place) -> Candidate:
    """Plan the request in this partition and ask SLURM when it would start."""
    from hpctrain.cli.race import verdict_dict
    from hpctrain.plan import JobRequest
    from hpctrain.submission.kinds import submission

    nodes, gpus, _, _ = shape
    req = JobRequest(profile=profile, partition=partition, nodes=nodes, gpus_per_node=gpus,
                     time=time, command=("true",), preview=True, job_name="hpctrain-free")
    try:
        (script,) = submission(req, None).preview()
    except HpctrainError as e:
        first = e.what.splitlines()[0]
        return Candidate(profile.name, partition, f"{nodes}x{'?' if gpus is None else gpus}", None,
                         first.removeprefix(f"{profile.name}: "))
    label = f"{script.plan.nodes}x{script.plan.gpus_per_node}"
    verdict = place.slurm_client().test_only(script.text)
    return Candidate(profile.name, partition, label, verdict_dict(verdict), None)


@dataclass(frozen=True)
class View:
    """One profile's cluster: its partitions and windows, and your accounts there."""

    profile: str
    seen: Availability
    usage: Usage

    def as_dict(self) -> dict[str, object]:
        return {"profile": self.profile,
                "partitions": [r.as_dict() for r in self.seen.partitions],
                "maintenance": [w.as_dict() for w in self.seen.windows],
                "usage": self.usage.as_dict()}


def _profile_view(name: str, login: str | None, topologies: list[Shape], time: str | None,
                  days: float) -> tuple[View, list[Candidate]]:
    from hpctrain.profiles import load_profile

    profile = load_profile(name)
    place = backends.place_for(profile, login)
    client = place.slurm_client()
    view = View(name, client.availability(), client.usage(days))
    candidates = [_candidate(profile, p.name, t, time, place)
                  for t in topologies for p in profile.partitions
                  if t[2] in (None, p.name) and t[3] in (None, profile.name)]
    return view, candidates


def _window_line(profile: str, w: Window, now: float) -> str:
    """`raven: maintenance 'm1' 2026-11-28 06:00 to 10:00 (in 7 h 5 min): gpu 4/4 nodes`."""
    from hpctrain.slurm.reservations import minute
    from hpctrain.slurm.starts import span

    r = w.reservation
    when = "now" if r.start <= now else f"in {span(r.start - now)}"
    taken = ", ".join(f"{p} {n}/{of} nodes" for p, n, of in w.partitions)
    return (f"{profile}: maintenance '{r.name}' {minute(r.start)} to {minute(r.end)} "
            f"({when}): {taken}")


def _show(views: list[View], ranked: list[Candidate], days: float) -> None:
    import time

    from hpctrain.cli.costview import usage_text

    columns = ("PROFILE", "PARTITION", "GPU", "GPUS FREE", "IN USE", "NODES IDLE", "WAITING")
    rows = [(v.profile, r.partition, r.gpu_type or "-", f"{r.free}/{r.gpus}", str(r.used),
             f"{r.idle_nodes}/{r.nodes}", str(r.waiting))
            for v in views for r in v.seen.partitions]
    console.print(plain_columns(columns, rows), highlight=False, markup=False, soft_wrap=True,
                  end="")
    now = time.time()
    for line in [_window_line(v.profile, w, now) for v in views for w in v.seen.windows]:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    for v in views:
        console.print("\n" + usage_text(v.profile, v.usage, days), highlight=False,
                      markup=False, soft_wrap=True, end="")
    if not ranked:
        return
    console.print("\nwhere the request would start, soonest first (sbatch --test-only):",
                  highlight=False)
    lines = [(c.profile, c.partition, c.topology, _starts(c)) for c in ranked]
    console.print(plain_columns(("PROFILE", "PARTITION", "TOPOLOGY", "STARTS"), lines),
                  highlight=False, markup=False, soft_wrap=True)
    seen = {v.profile: v.seen for v in views}
    for c in ranked:
        note = _later_though_idle(c, seen[c.profile]) if c.profile in seen else None
        if note:
            console.print(note, highlight=False, markup=False, soft_wrap=True)


# SLURM's start estimates are to the second; a start within this is `now` as a person reads it.
_AT_ONCE_S = 60


def _later_though_idle(c: Candidate, seen: Availability) -> str | None:
    """Why SLURM expects a later start than the idle nodes above suggest, where it does."""
    from hpctrain.slurm.availability import idle_for

    wait = (c.verdict or {}).get("wait_s")
    nodes = c.topology.partition("x")[0]
    if c.refused or not isinstance(wait, int | float) or wait < _AT_ONCE_S \
            or not nodes.isdigit():
        return None
    row = idle_for(seen.partitions, c.partition, int(nodes))
    if row is None:
        return None
    taken = [w.reservation.name for w in seen.windows
             if any(p == c.partition for p, _, _ in w.partitions)]
    idle = f"{row.idle_nodes} of {c.partition}'s nodes are idle now"
    if taken:
        return (f"note: {c.profile} {c.partition} {c.topology}: {idle}, but SLURM keeps them for "
                f"maintenance {', '.join(taken)} (above): a job that would still run then "
                "waits until it is over; a shorter --time may start at once")
    if row.waiting:
        # job_mgr.c, _delayed_job_start_time: --test-only adds the time limits of the jobs
        # pending in the partition ahead of it (spread over its CPUs), also of those waiting for
        # a begin time or a dependency, which take no node now (the dev cluster: one 1-node job
        # of 10 min waiting for --begin made an idle 2-node partition's estimate `in 5 min`).
        return (f"note: {c.profile} {c.partition} {c.topology}: {idle}; SLURM's estimate adds "
                f"the time limits of the {row.waiting} job(s) waiting in {c.partition}, "
                "whatever they wait for (a begin time, a dependency): it may start at once "
                "unless those take the nodes first")
    return (f"note: {c.profile} {c.partition} {c.topology}: {idle}; the later start is SLURM's "
            "estimate (sbatch --test-only), from what it weighs beyond the nodes (limits, "
            "reservations, its next scheduling pass)")


def _devcluster_profile() -> str | None:
    """The profile the dev cluster emulates, when it runs and is the SLURM asked from here."""
    from hpctrain.devcluster import DevCluster
    from hpctrain.slurm.runner import resolve_slurm_conf

    status = DevCluster().status(with_sinfo=False)
    # SLURM_CONF naming another cluster wins: free would ask that one, not the dev cluster.
    if not status.running or resolve_slurm_conf() != status.slurm_conf:
        return None
    return status.profile


def _with_login() -> list[str]:
    """Every profile that names a login host: the clusters reachable from here; without one,
    the profile the dev cluster emulates, when it runs."""
    from hpctrain import places
    from hpctrain.profiles import load_profile
    from hpctrain.profiles.loader import list_profiles

    names = [p.name for p in places.elsewhere([load_profile(i.name) for i in list_profiles()])]
    if not names and (emulated := _devcluster_profile()):
        return [emulated]
    if not names:
        raise HpctrainError("no profile names a login host, no dev cluster runs here, and no "
                            "--profile is given",
                            "give the profiles to look at, e.g. hpctrain free -P raven "
                            "(a profile's `login:` makes it a default here; docs/remote.md)")
    return names


def _starts(c: Candidate) -> str:
    """When and where a candidate would start, or who refuses it and why."""
    if c.refused:
        return f"refused by hpctrain: {c.refused}"
    v = c.verdict or {}
    start = v.get("start")
    if v.get("accepted") and isinstance(start, dict):
        return f"{v.get('starts')} on {start.get('nodes')}"
    said = str(v.get("message", "")).strip().splitlines()
    return f"refused by SLURM: {said[-1] if said else '?'}"


def free(
    profiles: Annotated[list[str] | None, typer.Option(
        "--profile", "-P", help="A profile to look at (repeatable): its cluster's partitions. "
        "Default: every profile with a login (docs/remote.md), else the dev cluster's.")] = None,
    login: LoginOpt = None,
    nodes: Annotated[int, job_option("nodes")] = 1,
    gpus_per_node: Annotated[int | None, job_option("gpus_per_node")] = None,
    # free places them, it races nothing: the table's --first-of, in free's words.
    first_of: Annotated[str | None, FIRST_OF.declaration(
        "Several topologies to place, e.g. 1x4,2x2, gpudev:1x4 or 2x4@raven.")] = None,
    time: Annotated[str | None, job_option("time")] = None,
    days: Annotated[float, typer.Option(
        "--days", min=0.01, help="The period of the accounts' usage, in days back from now.")
    ] = 30,
    json_out: JsonOpt = False,
) -> None:
    """Where GPUs are free now, per partition, maintenance ahead, your accounts' usage, and
    where a request would start soonest."""
    topologies = _topologies(first_of, nodes, gpus_per_node)
    named = [t[3] for t in topologies if t[3]]
    # The profiles --first-of names are looked at too (without -P: they alone).
    profiles = list(dict.fromkeys([*(profiles or ()), *named])) or _with_login()
    if login and len(profiles) > 1:
        raise HpctrainError("--login reaches one cluster", "give one --profile with it")
    views, candidates = [], []
    for name in profiles:
        view, found = _profile_view(name, login, topologies, time, days)
        views.append(view)
        candidates += found
    ranked = sorted(candidates, key=Candidate.sort_key)
    if json_out:
        print_json({"profiles": [v.as_dict() for v in views],
                    "candidates": [c.as_dict() for c in ranked]})
        return
    _show(views, ranked, days)


def register(app: typer.Typer) -> None:
    """Add free to the root app."""
    app.command(epilog="Example: hpctrain free -P raven --first-of 1x4,2x2")(free)

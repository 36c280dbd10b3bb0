"""The only place that runs SLURM commands; every call has a timeout."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import SlurmError, SlurmUnavailableError
from hpctrain.files import paths
from hpctrain.slurm import parsers, parsers_json, query, starts
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.query import QueueResult
from hpctrain.slurm.sbatch_options import INPUT_VARIABLES, sbatch_environment
from hpctrain.slurm.transport import (
    CONTROLLER_COMMANDS,
    DOWN_FIX,
    NO_CONF_MARKERS,
    Answer,
    ControllerDownError,
    LocalTransport,
    Transport,
    no_conf_error,
)
from hpctrain.slurm.versions import NODES_TEXT_ARGV, Dialect, dialect_for, parse_version
from hpctrain.startup import ahead
from hpctrain.startup.debuglog import debug

# accounting, availability, controller, reservations and usage are imported by the methods
# that use them: `status` needs none, and each costs start-up time on a login node.
if TYPE_CHECKING:
    from hpctrain.slurm import availability, inventory, reservations, usage
    from hpctrain.slurm.accounting import Accounting
    from hpctrain.slurm.reservations import Reservation

DEFAULT_TIMEOUT_S = 10.0
# `hpctrain --debug` shows these: every SLURM command, and which output format was chosen.
LOGGER = "hpctrain.slurm"


class SlurmTimeoutError(SlurmUnavailableError):
    """A SLURM command did not answer within the client's timeout."""


class AccountingUnavailableError(SlurmError):
    """sacct cannot answer: accounting is off here, or slurmdbd is down."""


def controller_gone(error: SlurmError) -> bool:
    """The controller refused or did not answer: the error cost a wait, and the next command
    would wait again. A submit's questions before sbatch raise it at once (a SLURM that is not
    configured here at all, or a refused question, leaves the plan to go on without)."""
    return isinstance(error, ControllerDownError | SlurmTimeoutError)


def resolve_slurm_conf() -> str | None:
    """SLURM_CONF from the environment; else the one a local cluster published; else None."""
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    # `hpctrain devcluster up` publishes its slurm.conf and `down` withdraws it; with None
    # the SLURM commands read the system's configuration.
    conf = paths.published_slurm_conf()
    return str(conf) if conf else None


@dataclass(frozen=True)
class Result:
    """One SLURM command's argv, exit code and output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class SlurmClient:
    """Runs sbatch/squeue/sacct/scancel/scontrol/sinfo/sacctmgr with one environment."""

    # Where the commands run: here (slurm.transport.LocalTransport) or on a login.
    transport: Transport
    timeout_s: float = DEFAULT_TIMEOUT_S
    calls: list[tuple[str, ...]] = field(default_factory=list)
    # time.monotonic() of each call, so that callers can check how often SLURM was asked.
    call_times: list[float] = field(default_factory=list)
    # The SLURM here and how to read it (slurm/versions.py), learnt on first need.
    _dialect: Dialect | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_environment(cls, timeout_s: float | None = None) -> SlurmClient:
        """The client for the SLURM here: SLURM_CONF, else the dev cluster's, else the system's."""
        return cls.local(resolve_slurm_conf(), timeout_s)

    @classmethod
    def local(cls, slurm_conf: str | None, timeout_s: float | None = None) -> SlurmClient:
        """The client for the SLURM here, reading `slurm_conf` (None: the system's)."""
        return cls(LocalTransport(slurm_conf),
                   timeout_s=timeout_s if timeout_s is not None else _env_timeout())

    @classmethod
    def over(cls, transport: Transport) -> SlurmClient:
        """The client whose commands run through `transport`, with this machine's timeout."""
        return cls(transport, timeout_s=_env_timeout())

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout_s: float | None = None,
        check: bool = True,
        cwd: str | Path | None = None,
    ) -> Result:
        """Run one SLURM command; raise SlurmUnavailableError on absence, a dead controller
        or timeout."""
        argv = tuple(argv)
        debug(LOGGER, "%s", shlex.join(argv))
        self.calls.append(argv)
        self.call_times.append(time.monotonic())
        limit = timeout_s if timeout_s is not None else self.timeout_s
        # sbatch lets SBATCH_* variables override the script's #SBATCH lines (sbatch(1), "INPUT
        # ENVIRONMENT VARIABLES"): the plan has taken or refused them; the script is the job.
        transport = for_sbatch(self.transport) if argv[0] == "sbatch" else self.transport
        try:
            stdout, stderr, code = transport.execute(argv, input, limit, cwd)
        except subprocess.TimeoutExpired:
            raise self._timeout_error(argv[0], limit) from None
        result = Result(argv, code, stdout, stderr)
        if check and code != 0:
            raise self.error_for(result)
        return result

    def _timeout_error(self, command: str, limit: float) -> SlurmTimeoutError:
        from hpctrain.slurm import controller

        conf = self.transport.conf_path()
        found = controller.controllers(conf) if command in CONTROLLER_COMMANDS else []
        why = (f"{found[0]} takes connections but did not answer (stopped, hung or overloaded)"
               if found else "SLURM is down or overloaded")
        return SlurmTimeoutError(
            f"{command} did not answer within {limit:g} s: {why}",
            "check `sinfo`; on the dev cluster run `hpctrain devcluster status`; "
            "HPCTRAIN_SLURM_TIMEOUT raises the limit",
        )

    def error_for(self, result: Result) -> SlurmError:
        """SLURM's failure as an error; the same diagnosis as every other command's when no
        slurm.conf is readable or the controller cannot be reached."""
        error = _error_for(result)
        if not isinstance(error, SlurmUnavailableError):
            return error
        if self._lacks_conf(result):
            return no_conf_error(self.transport.conf_path())
        if result.argv[0] in CONTROLLER_COMMANDS:
            return self.transport.controller_down(result.argv[0]) or error
        return error

    def _lacks_conf(self, result: Result) -> bool:
        # Only here can hpctrain see that no slurm.conf is readable; a login's commands
        # keep SLURM's own words.
        text = (result.stderr + result.stdout).lower()
        return (isinstance(self.transport, LocalTransport)
                and not _readable(self.transport.conf_path())
                and any(m in text for m in NO_CONF_MARKERS))

    def unknown_cluster_error(self) -> SlurmUnavailableError:
        """Why hpctrain cannot tell which cluster the SLURM commands talk to."""
        path = self.transport.conf_path()
        if not _readable(path):
            return no_conf_error(path)
        return SlurmUnavailableError(
            f"cannot tell which SLURM cluster this is: {path} names no ClusterName",
            "add ClusterName to it, set SLURM_CONF to the cluster's slurm.conf, or run "
            "hpctrain on the cluster's login node",
        )

    # --- the commands hpctrain uses, each one call with machine-readable output ---------------

    def submit(self, script: str | Path, *, cwd: str | Path | None = None,
               options: Sequence[str] = ()) -> str:
        """`sbatch --parsable [OPTIONS] SCRIPT`; the job id, or SlurmError with SLURM's words."""
        try:
            result = self.run(["sbatch", "--parsable", *options, str(script)], cwd=cwd,
                              check=False)
        except SlurmTimeoutError as e:
            raise SlurmTimeoutError(
                f"{e.what}; the job may have been queued all the same",
                "look for it with `squeue --me` before submitting again; "
                "HPCTRAIN_SLURM_TIMEOUT raises the limit",
            ) from None
        if result.returncode != 0:
            error = self.error_for(result)
            if isinstance(error, SlurmUnavailableError):
                raise error
            message = (result.stderr or result.stdout).strip()
            raise SlurmError(
                f"SLURM refused the job: {message or f'sbatch exit {result.returncode}'}",
                "change the request as SLURM's message says; "
                "`hpctrain render ... --check` asks SLURM without queueing",
            )
        job_id, _cluster = parsers.parse_sbatch_parsable(result.stdout)
        return job_id

    def dialect(self) -> Dialect:
        """The SLURM here and whether its job queries answer in JSON (one `sinfo --version`)."""
        if self._dialect is None:
            known = self.transport.slurm_version_text()
            try:
                version: tuple[int, int] | None = (
                    parse_version(known) if known else self.slurm_version())
            except (SlurmError, ValueError):
                version = None
            self._dialect = dialect_for(version, os.environ)
            debug(LOGGER, "%s", self._dialect.describe())
        return self._dialect

    def queue(self, job_ids: Sequence[str]) -> QueueResult:
        """squeue about every id, then sacct about those it leaves without an end, as the
        query's plan says (slurm/query.py): one round trip over a login, one after the other
        here. SlurmError when squeue fails; sacct's failure is in the result."""
        q = query.plan(job_ids, self.dialect(), batches=self.transport.batches)
        if not q.ids:
            return QueueResult(q)
        if q.together:
            live, acct = self._run_together((q.squeue_argv(), q.sacct_argv()))
        else:
            live, acct = self.run(q.squeue_argv(), check=False), None
        jobs, found = self._read_squeue(q.form, live)
        result = QueueResult(q, jobs, found)
        need = result.needing_accounting()
        if not need:
            return result
        try:
            rows = self._read_sacct(q.form, acct if acct is not None
                                    else self._run_sacct(q.sacct_argv(need)))
        except AccountingUnavailableError as e:
            return replace(result, accounting_error=e)
        return replace(result, accounting={j: rows[j] for j in need if j in rows})

    def squeue(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One `squeue` for all ids; jobs the controller has forgotten are simply absent."""
        if not job_ids:
            return {}
        form = query.form_for(job_ids, self.dialect())
        return self._read_squeue(form, self.run(form.squeue_argv(job_ids), check=False))[0]

    def sacct(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """One `sacct` for all ids (allocations only); AccountingUnavailableError if it can't."""
        if not job_ids:
            return {}
        form = query.form_for(job_ids, self.dialect())
        return self._read_sacct(form, self._run_sacct(form.sacct_argv(job_ids)))

    def _read_squeue(self, form: query.Form, result: Result
                     ) -> tuple[dict[str, JobInfo], dict[str, str | None]]:
        if result.returncode != 0:
            # squeue refuses a job list in which no id is known to the controller any more.
            if "invalid job id" in result.stderr.lower():
                return {}, {}
            raise self.error_for(result)
        return form.read_squeue(result.stdout, time.time())

    def _run_sacct(self, argv: Sequence[str]) -> Result:
        try:
            return self.run(argv, check=False)
        except SlurmTimeoutError as e:
            raise AccountingUnavailableError(e.what, e.fix) from None

    @staticmethod
    def _read_sacct(form: query.Form, result: Result) -> dict[str, JobInfo]:
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip() or f"exit {result.returncode}"
            raise AccountingUnavailableError(
                f"sacct failed: {message}",
                "job accounting (slurmdbd) is off or down here; hpctrain falls back to "
                "scontrol and the last state it saw",
            )
        return form.read_sacct(result.stdout)

    def _run_together(self, argvs: Sequence[tuple[str, ...]]) -> list[Result]:
        """Several commands in one round trip (a login's); a timeout is squeue's."""
        now = time.monotonic()
        for argv in argvs:
            debug(LOGGER, "%s", shlex.join(argv))
            self.calls.append(argv)
            self.call_times.append(now)
        try:
            answers = self.transport.execute_many(argvs, self.timeout_s)
        except subprocess.TimeoutExpired:
            raise self._timeout_error("squeue", self.timeout_s) from None
        return [Result(argv, code, out, err)
                for argv, (out, err, code) in zip(argvs, answers, strict=True)]

    def accounting(self, job_id: str) -> Accounting:
        """Every run and step of one job, in one `sacct` (text on every version: the fields
        `why` reads are the same in all of them); AccountingUnavailableError if it can't."""
        from hpctrain.slurm import accounting

        try:
            result = self.run(accounting.argv(job_id), check=False)
        except SlurmTimeoutError as e:
            raise AccountingUnavailableError(e.what, e.fix) from None
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip() or f"exit {result.returncode}"
            raise AccountingUnavailableError(
                f"sacct failed: {message}",
                "job accounting (slurmdbd) is off or down here; `hpctrain why` needs it")
        return accounting.parse_accounting(result.stdout)

    def pending_start(self, job_id: str) -> tuple[str | None, str | None]:
        """A waiting job's reason and SLURM's start estimate, from one text `squeue` (the same
        on every version); (None, None) once squeue no longer knows the job."""
        return parse_pending(self.run(pending_argv(job_id), check=False).stdout)

    def scontrol_job(self, job_id: str) -> JobInfo | None:
        """`scontrol -o show job ID` (`--json` where the dialect says); None once the controller
        has forgotten the job."""
        json_out = self.dialect().json
        argv = ["scontrol", "--json" if json_out else "--oneliner", "show", "job", job_id]
        result = self.run(argv, check=False)
        if result.returncode != 0:
            if "invalid job id" in (result.stderr + result.stdout).lower():
                return None
            raise self.error_for(result)
        if not json_out:
            return parsers.parse_scontrol_job(result.stdout)
        info = parsers_json.parse_scontrol_job_json(result.stdout, time.time())
        # 24.11's `scontrol --json` answers `"jobs": []` and exit 0 both for a forgotten job and
        # when no controller answers (recorded): only the controller's port tells them apart.
        if info is None and (down := self.transport.controller_down("scontrol")):
            raise down
        return info

    def scancel(self, job_ids: Sequence[str]) -> None:
        """One `scancel` for all ids."""
        # SLURM 22.05's scancel says nothing (exit 0) for jobs that already ended or that it
        # does not know, so callers decide from the history which ids to send.
        if job_ids:
            self.run(["scancel", *dict.fromkeys(job_ids)])

    def release(self, job_ids: Sequence[str]) -> None:
        """`scontrol release` jobs queued with `sbatch --hold` (one call for all)."""
        if job_ids:
            self.run(["scontrol", "release", ",".join(dict.fromkeys(job_ids))])

    def queued_job_ids(self) -> list[str]:
        """Ids of every job the controller still holds (`squeue --noheader --format=%i`)."""
        return self.run(["squeue", "--noheader", "--format=%i"]).stdout.split()

    def sinfo(self) -> str:
        """`sinfo`'s own table, for people."""
        return self.run(["sinfo"]).stdout.rstrip()

    def node_states(self) -> dict[str, str]:
        """Each node's short state (idle, alloc, drain, down*, ...), from one `sinfo`."""
        result = self.run(["sinfo", "--noheader", "--Node", "--format=%N %t"])
        return parsers.parse_sinfo_node_states(result.stdout)

    def partition_nodes(self) -> dict[str, list[str]]:
        """Each partition's nodes, from one `sinfo` (a node may be in several)."""
        result = self.run(["sinfo", "--noheader", "--Node", "--format=%N %R"])
        return parsers.parse_sinfo_partition_nodes(result.stdout)

    def availability(self, now: float | None = None) -> availability.Availability:
        """Each partition's GPUs busy and free, its waiting jobs and the maintenance windows
        ahead: sinfo, squeue and scontrol in one round trip (slurm/availability.py)."""
        from hpctrain.slurm import availability, reservations

        argvs = (availability.SINFO_ARGV, availability.SQUEUE_ARGV, reservations.SHOW_ARGV)
        nodes, queue, reserved = self._run_together(argvs)
        for got in (nodes, queue, reserved):
            if got.returncode != 0:
                raise SlurmError(f"{got.argv[0]} failed: {(got.stderr or got.stdout).strip()}",
                                 "check that SLURM answers (`sinfo`)")
        found = availability.parse_nodes(nodes.stdout)
        return availability.Availability(
            availability.by_partition(found, availability.parse_waiting(queue.stdout)),
            availability.windows(found, reservations.parse(reserved.stdout),
                                 time.time() if now is None else now))

    def usage(self, days: float, now: float | None = None) -> usage.Usage:
        """Your accounts' GPU-hours over the last `days`, their fair share and what your jobs
        hold: sacct, sshare, sprio and squeue in one round trip (slurm/usage.py)."""
        from hpctrain.slurm import availability, usage

        now = time.time() if now is None else now
        since = now - days * 86400
        acct, share, prio, mine = self._run_together(
            (usage.sacct_argv(since), usage.SSHARE_ARGV, usage.SPRIO_ARGV,
             availability.MINE_ARGV))
        said = (acct.stderr or acct.stdout).strip() or f"exit {acct.returncode}"
        return usage.usage(since, now, _answer(acct), _answer(share),
                           (prio.returncode, prio.stdout + prio.stderr), _answer(mine),
                           None if acct.returncode == 0 else f"sacct: {said}")

    def reservations(self) -> list[reservations.Reservation]:
        """The cluster's reservations (`scontrol show reservation`; slurm/reservations.py):
        the answer of `reservations_ahead` where this command started it."""
        return ahead.answer(("reservations", id(self)), self._reservations)

    def reservations_ahead(self) -> None:
        """Ask for the reservations in a thread now (hpctrain/startup/ahead.py): a submit's first
        question, while it is still importing."""
        ahead.start(("reservations", id(self)), self._reservations)

    def _reservations(self) -> list[Reservation]:
        from hpctrain.slurm import reservations

        return reservations.parse(self.run(list(reservations.SHOW_ARGV)).stdout)

    def node_reasons(self) -> str:
        """Why nodes are down or drained (`sinfo --list-reasons`), for error messages."""
        return self.run(["sinfo", "--list-reasons"]).stdout.strip()

    def resume_nodes(self, nodes: Sequence[str]) -> None:
        """Return drained or down nodes to service (`scontrol update ... State=RESUME`)."""
        if nodes:
            self.run(["scontrol", "update", f"NodeName={','.join(nodes)}", "State=RESUME"])

    # --- the cluster's inventory (`hpctrain profiles discover|check`) ----------------------

    def slurm_version(self) -> tuple[int, int]:
        """(major, minor) of the SLURM commands here, from `sinfo --version` (no daemon asked)."""
        return parse_version(self.run(["sinfo", "--version"]).stdout)

    def partition_limits(self) -> list[inventory.PartitionInfo]:
        """Every partition with its limits (`scontrol --oneliner show partition`)."""
        from hpctrain.slurm.inventory import parse_partitions_text

        result = self.run(["scontrol", "--oneliner", "show", "partition"])
        return parse_partitions_text(result.stdout)

    def node_inventory(self, dialect: Dialect | None = None) -> list[inventory.NodeInfo]:
        """Every node's shape, in JSON where this SLURM has it (versions.Dialect.nodes_argv)."""
        from hpctrain.slurm import inventory as inv

        argv = (dialect or self.dialect()).nodes_argv()
        if argv != NODES_TEXT_ARGV:
            result = self.run(argv, check=False)
            # A site without SLURM's JSON plugins refuses --json: the text path still works.
            nodes = inv.parse_nodes_json(result.stdout) if result.returncode == 0 else None
            if nodes is not None:
                return nodes
        return inv.parse_nodes_text(self.run(NODES_TEXT_ARGV).stdout)

    def config(self) -> dict[str, str]:
        """slurmctld's running configuration (`scontrol show config`)."""
        from hpctrain.slurm.inventory import parse_config

        return parse_config(self.run(["scontrol", "show", "config"]).stdout)

    def qos_limits(self) -> list[inventory.QosInfo]:
        """Every QOS with its limits; SlurmError where sacctmgr is refused or absent."""
        from hpctrain.slurm.inventory import QOS_FORMAT, parse_qos

        return parse_qos(self.sacctmgr(["-P", "-n", "show", "qos", f"format={QOS_FORMAT}"]))

    def associations(self, user: str) -> list[inventory.Association]:
        """The accounts (and QOS) `user` may use; SlurmError where sacctmgr is refused."""
        from hpctrain.slurm.inventory import ASSOC_FORMAT, parse_associations

        return parse_associations(self.sacctmgr(
            ["-P", "-n", "show", "assoc", f"user={user}", f"format={ASSOC_FORMAT}"]))

    def sacctmgr(self, args: Sequence[str]) -> str:
        """`sacctmgr ARGS`; return its output, or raise SlurmError with the whole command."""
        argv = ["sacctmgr", *args]
        result = self.run(argv, check=False)
        # sacctmgr -i add exits 1 with "Nothing new added" when everything exists already.
        if result.returncode != 0 and "nothing new added" not in (
                result.stdout + result.stderr).lower():
            raise SlurmError(
                f"{' '.join(argv)} failed: {(result.stderr or result.stdout).strip()}")
        return result.stdout

    def cluster_name(self) -> str | None:
        """The cluster the commands talk to, as learnt without a SLURM call; None: unknown."""
        return self.transport.cluster_name()


@dataclass(frozen=True)
class _LocalSbatch(LocalTransport):
    """This machine's transport, its environment as sbatch should see it."""

    def env(self) -> dict[str, str]:
        return sbatch_environment(super().env())


@dataclass(frozen=True)
class _UnsetFirst:
    """A login's transport whose commands run under `env -u NAME ...`: the login's shell
    (its ~/.bashrc) may export SBATCH_ variables, which sbatch there would prefer."""

    inner: Transport

    @property
    def batches(self) -> bool:
        return self.inner.batches

    def _unset(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        return ("env", *(w for name in sorted(INPUT_VARIABLES) for w in ("-u", name)), *argv)

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> Answer:
        return self.inner.execute(self._unset(argv), input, limit, cwd)

    def execute_many(self, argvs: Sequence[tuple[str, ...]], limit: float) -> list[Answer]:
        return self.inner.execute_many([self._unset(a) for a in argvs], limit)

    def conf_path(self) -> str | None:
        return self.inner.conf_path()

    def controller_down(self, command: str) -> ControllerDownError | None:
        return self.inner.controller_down(command)

    def cluster_name(self) -> str | None:
        return self.inner.cluster_name()

    def slurm_version_text(self) -> str | None:
        return self.inner.slurm_version_text()


def for_sbatch(transport: Transport) -> Transport:
    """`transport` for running sbatch: without the variables it would read as options."""
    if isinstance(transport, LocalTransport):
        return _LocalSbatch(transport.slurm_conf)
    return _UnsetFirst(transport)


def pending_argv(job_id: str) -> tuple[str, ...]:
    return ("squeue", "--noheader", "--jobs", parsers.job_id_list([job_id]), "--format",
            "%r|%S")


def parse_pending(stdout: str) -> tuple[str | None, str | None]:
    line = next((ln for ln in stdout.splitlines() if "|" in ln), "")
    reason, _, start = line.partition("|")
    return parsers.empty_value(reason), starts.start_or_none(start)


def _readable(path: str | None) -> bool:
    return path is not None and os.access(path, os.R_OK)


def _env_timeout() -> float:
    try:
        return float(os.environ.get("HPCTRAIN_SLURM_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


_DOWN_MARKERS = (
    "unable to contact slurm controller",
    "slurm_persist_conn_open",
    "connection refused",
    "socket timed out",
    "zero bytes were transmitted",
    "unable to establish a connection",
    "could not establish a configuration source",
    "couldn't find the specified plugin",
    "slurm.conf",
)


def _error_for(result: Result) -> SlurmError:
    message = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
    first = message.splitlines()[0] if message else message
    low = message.lower()
    # "sbatch --test-only", "scontrol show", "squeue": the command, not its option soup.
    cmd = " ".join(a for i, a in enumerate(result.argv[:2])
                   if i == 0 or a in ("--test-only", "show", "update", "hold", "release"))
    if any(m in low for m in _DOWN_MARKERS):
        return SlurmUnavailableError(
            f"{cmd}: SLURM is not reachable: {first}", DOWN_FIX,
        )
    return SlurmError(f"{cmd} failed: {message}")


@dataclass(frozen=True)
class TestOnlyVerdict:
    """SLURM's answer to `sbatch --test-only`: would it accept the script?"""

    accepted: bool
    message: str
    # When and where SLURM would start it, from the same answer (None: refused).
    estimate: starts.StartEstimate | None = None


def parse_test_only(result: Result) -> TestOnlyVerdict:
    """sbatch --test-only answers on stderr: 'Job N to start at ...' or 'error: ...'."""
    text = "\n".join(s for s in (result.stderr.strip(), result.stdout.strip()) if s)
    accepted = result.returncode == 0 and "to start at" in text
    return TestOnlyVerdict(accepted=accepted, message=text or f"exit status {result.returncode}",
                           estimate=starts.parse_test_only(text) if accepted else None)


def sbatch_test_only(client: SlurmClient, script: str) -> TestOnlyVerdict:
    """Ask the SLURM in reach whether it would accept `script`, without queueing it."""
    result = client.run(["sbatch", "--test-only"], input=script, check=False)
    verdict = parse_test_only(result)
    # A refusal is an answer; a SLURM that cannot be reached is an error.
    if not verdict.accepted and isinstance(err := client.error_for(result), SlurmUnavailableError):
        raise err
    return verdict


def _answer(result: Result) -> str | None:
    """What a command printed, or None where it failed."""
    return result.stdout if result.returncode == 0 else None

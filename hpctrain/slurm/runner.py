"""How one SLURM command is run and its failure read: the core under every family of calls.

`SlurmRunner` sends argv through its transport (slurm/transport.py, where the processes start)
with a timeout and turns a failure into hpctrain's errors; the families of calls (jobs.py,
capacity.py, survey.py, testonly.py) build on it, and client.py's `SlurmClient` is the one
door to them all.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.errors import SlurmError, SlurmUnavailableError
from hpctrain.files import paths
from hpctrain.slurm.transport import (
    CONTROLLER_COMMANDS,
    DOWN_FIX,
    NO_CONF_MARKERS,
    ControllerDownError,
    LocalTransport,
    Transport,
    for_sbatch,
    no_conf_error,
)
from hpctrain.slurm.versions import Dialect, dialect_for, parse_version
from hpctrain.startup.debuglog import debug

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

    def said(self) -> str:
        """What the command printed about its failure (stderr first), or its exit status."""
        return (self.stderr or self.stdout).strip() or f"exit {self.returncode}"


@dataclass
class SlurmRunner:
    """Runs sbatch/squeue/sacct/scancel/scontrol/sinfo/sacctmgr with one environment."""

    # Where the commands run: here (slurm.transport.LocalTransport) or on a login.
    transport: Transport
    timeout_s: float = DEFAULT_TIMEOUT_S
    # The SLURM here and how to read it (slurm/versions.py), learnt on first need.
    _dialect: Dialect | None = field(default=None, init=False, repr=False)

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

    def run_together(self, argvs: Sequence[tuple[str, ...]]) -> list[Result]:
        """Several commands in one round trip (a login's); a timeout is squeue's."""
        for argv in argvs:
            debug(LOGGER, "%s", shlex.join(argv))
        try:
            answers = self.transport.execute_many(argvs, self.timeout_s)
        except subprocess.TimeoutExpired:
            raise self._timeout_error("squeue", self.timeout_s) from None
        return [Result(argv, code, out, err)
                for argv, (out, err, code) in zip(argvs, answers, strict=True)]

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
        error = plain_error(result)
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

    def slurm_version(self) -> tuple[int, int]:
        """(major, minor) of the SLURM commands here, from `sinfo --version` (no daemon asked)."""
        return parse_version(self.run(["sinfo", "--version"]).stdout)


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


def plain_error(result: Result) -> SlurmError:
    """SLURM's failure as its words say it, without asking the controller's port."""
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


def _readable(path: str | None) -> bool:
    return path is not None and os.access(path, os.R_OK)


"""Where SLURM's commands run, the one place that starts them: here (LocalTransport) or on a
login (places/login.py's SshTransport, over remote/connection.py's ssh master)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hpctrain.errors import SlurmUnavailableError
from hpctrain.slurm import parsers
from hpctrain.slurm.sbatch_options import INPUT_VARIABLES, sbatch_environment

# Where slurm.conf is read from when SLURM_CONF is unset: Debian's default, older Debian's,
# and the caches of configless sites (slurmd's, then sackd's).
SYSTEM_CONFS = (
    "/etc/slurm/slurm.conf",
    "/etc/slurm-llnl/slurm.conf",
    "/run/slurm/conf/slurm.conf",
    "/var/spool/slurmd/conf-cache/slurm.conf",
)
# The commands that talk to slurmctld; sacct and sacctmgr talk to slurmdbd.
CONTROLLER_COMMANDS = frozenset({"sbatch", "squeue", "scontrol", "scancel", "sinfo"})
# A healthy controller answers within this; only a slower command makes the client look at
# the controller's port. Not sooner: slurmctld logs an error for every connection that
# brings no message, and a login node runs many `hpctrain status`.
PROBE_AFTER_S = 1.0
# The one fix for a controller that cannot be reached, whichever command met it.
DOWN_FIX = (
    "SLURM commands cannot work until slurmctld is back (running jobs go on); on the dev "
    "cluster run `hpctrain devcluster up`, on a real cluster check `scontrol ping` and tell "
    "its admins"
)

# What SLURM's commands say when they find neither a slurm.conf nor a configless site's DNS
# SRV record: they looked for a configuration, not for a controller.
NO_CONF_MARKERS = ("resolve_ctls_from_dns_srv", "could not establish a configuration source")

Answer = tuple[str, str, int]


class ControllerDownError(SlurmUnavailableError):
    """slurmctld refuses connections or cannot be reached at all."""


class Transport(Protocol):
    """Runs SLURM's commands somewhere and knows what can be learnt there without SLURM."""

    @property
    def batches(self) -> bool:
        """True where a command costs a round trip: squeue and sacct are then asked together."""
        ...

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> Answer:
        """The command's stdout, stderr and exit status; subprocess.TimeoutExpired past `limit`."""
        ...

    def execute_many(self, argvs: Sequence[tuple[str, ...]], limit: float) -> list[Answer]: ...

    def conf_path(self) -> str | None:
        """The slurm.conf readable from here, if any (None: no controller to look at)."""
        ...

    def controller_down(self, command: str) -> ControllerDownError | None:
        """The error naming slurmctld when no controller accepts a connection, else None."""
        ...

    def cluster_name(self) -> str | None: ...

    def slurm_version_text(self) -> str | None:
        """`sinfo --version` as already known without a command (a login's facts); None: ask."""
        ...


@dataclass(frozen=True)
class LocalTransport:
    """SLURM's commands on this machine, with `slurm_conf` (None: the system's configuration)."""

    slurm_conf: str | None = None

    @property
    def batches(self) -> bool:
        # A local command is cheap; batching would only delay sacct's answer.
        return False

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> Answer:
        """The command's output and exit status; stops it early when slurmctld is down."""
        _require_program(argv[0])
        if self.slurm_conf and "--version" not in argv and not os.access(self.slurm_conf, os.R_OK):
            # SLURM's commands retry an unreadable SLURM_CONF until their own timeout.
            raise no_conf_error(self.slurm_conf)
        deadline = time.monotonic() + limit
        with subprocess.Popen(
            argv, stdin=subprocess.PIPE if input is not None else None,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env(), cwd=cwd,
        ) as proc:
            try:
                try:
                    out, err = proc.communicate(input, timeout=min(PROBE_AFTER_S, limit))
                except subprocess.TimeoutExpired:
                    if argv[0] in CONTROLLER_COMMANDS and (down := self.controller_down(argv[0])):
                        raise down from None
                    out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 0.0))
            except BaseException:
                # Ctrl-C, the timeout or a dead controller: the command must not outlive us.
                proc.kill()
                raise
        return out, err, proc.returncode

    def execute_many(self, argvs: Sequence[tuple[str, ...]], limit: float) -> list[Answer]:
        return [self.execute(argv, None, limit, None) for argv in argvs]

    def conf_path(self) -> str | None:
        if self.slurm_conf:
            return self.slurm_conf
        return next((p for p in SYSTEM_CONFS if os.access(p, os.R_OK)), None)

    def controller_down(self, command: str) -> ControllerDownError | None:
        # Only when a command failed: the port probe's socket module is not a status's cost.
        from hpctrain.slurm import controller

        why = controller.unreachable(controller.controllers(self.conf_path()))
        if why is None:
            return None
        return ControllerDownError(f"{command}: the SLURM controller is down: {why}", DOWN_FIX)

    def slurm_version_text(self) -> str | None:
        """`sinfo --version`, asked once per sinfo binary (slurm/versioncache.py); None where
        sinfo cannot say."""
        from hpctrain.slurm import versioncache

        env = self.env()
        key = versioncache.binary_key(env)
        if key is None:
            return None
        text = versioncache.known(key)
        if text is None:
            try:
                out, _err, code = self.execute(("sinfo", "--version"), None, 15.0, None)
            except (OSError, subprocess.TimeoutExpired, SlurmUnavailableError):
                return None  # the client asks again, and says what is wrong
            if code != 0 or not out.strip():
                return None
            text = out.strip()
            versioncache.remember(key, text)
        return text

    def cluster_name(self) -> str | None:
        """ClusterName from slurm.conf (no SLURM call); None where no config file is readable."""
        path = self.conf_path()
        if path is None:
            return os.environ.get("SLURM_CLUSTER_NAME") or None
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            return None
        return parsers.parse_cluster_name(text)


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

def no_conf_error(path: str | None = None) -> SlurmUnavailableError:
    """The one diagnosis for "no slurm.conf here", whichever command met it first; `path`: the
    one SLURM_CONF names but that cannot be read."""
    where = (f"SLURM_CONF names {path}, which cannot be read" if path else
             "SLURM_CONF is unset, no dev cluster is up, no /etc/slurm/slurm.conf")
    # Three routes, as the README gives them: a laptop goes through a login over ssh (no
    # slurm.conf needed here), a login node names its conf, a root shell starts the dev cluster.
    return SlurmUnavailableError(
        f"no slurm.conf is readable here ({where})",
        "from a laptop, give the profile a `login:` host (or pass --login DEST) and run "
        "`hpctrain login PROFILE` (docs/remote.md); on a login node, "
        "`export SLURM_CONF=/path/to/slurm.conf`; as root, `sudo -E hpctrain devcluster up`",
    )


def _require_program(name: str) -> None:
    if shutil.which(name) is None:
        raise SlurmUnavailableError(
            f"{name} not found: SLURM's client commands are not installed here",
            "run hpctrain on a cluster login node, or install Debian's slurm-client "
            "and start the dev cluster (`hpctrain devcluster up`)",
        )

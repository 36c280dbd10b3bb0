"""The only place that runs SLURM commands; every call has a timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.errors import SlurmError, SlurmUnavailableError

DEFAULT_TIMEOUT_S = 10.0


def devcluster_conf() -> Path | None:
    """The running dev cluster's slurm.conf, if hpctrain's dev cluster is up."""
    from hpctrain import paths

    conf = paths.devcluster_dir() / "etc" / "slurm.conf"
    pidfile = paths.devcluster_dir() / "run" / "slurmctld.pid"
    if not (conf.is_file() and pidfile.is_file()):
        return None
    try:
        os.kill(int(pidfile.read_text().strip()), 0)
    except (ValueError, OSError):
        return None
    return conf


def resolve_slurm_conf() -> str | None:
    """SLURM_CONF from the environment wins; else the running dev cluster's; else the system's."""
    if os.environ.get("SLURM_CONF"):
        return os.environ["SLURM_CONF"]
    conf = devcluster_conf()
    return str(conf) if conf else None


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class SlurmClient:
    """Runs sbatch/squeue/sacct/scancel/scontrol/sinfo/sacctmgr with one environment."""

    slurm_conf: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    calls: list[tuple[str, ...]] = field(default_factory=list)

    @classmethod
    def from_environment(cls, timeout_s: float | None = None) -> SlurmClient:
        return cls(
            slurm_conf=resolve_slurm_conf(),
            timeout_s=timeout_s if timeout_s is not None else _env_timeout(),
        )

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        timeout_s: float | None = None,
        check: bool = True,
        cwd: str | Path | None = None,
    ) -> Result:
        """Run one SLURM command; raise SlurmUnavailableError on absence or timeout."""
        argv = tuple(argv)
        if shutil.which(argv[0]) is None:
            raise SlurmUnavailableError(
                f"{argv[0]} not found: SLURM's client commands are not installed here",
                "run hpctrain on a cluster login node, or install Debian's slurm-client "
                "and start the dev cluster (`hpctrain devcluster up`)",
            )
        self.calls.append(argv)
        limit = timeout_s if timeout_s is not None else self.timeout_s
        try:
            proc = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                text=True,
                timeout=limit,
                env=self.env(),
                cwd=cwd,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnavailableError(
                f"{argv[0]} did not answer within {limit:g} s: SLURM is down or overloaded",
                "check `sinfo`; on the dev cluster run `hpctrain devcluster status`; "
                "HPCTRAIN_SLURM_TIMEOUT raises the limit",
            ) from None
        result = Result(argv, proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise _error_for(result)
        return result


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
    cmd = " ".join(result.argv[:2])
    if any(m in low for m in _DOWN_MARKERS):
        return SlurmUnavailableError(
            f"{cmd}: SLURM is not reachable: {first}",
            "check that slurmctld runs (`sinfo`); on the dev cluster: `hpctrain devcluster up`",
        )
    return SlurmError(f"{cmd} failed: {message}")


@dataclass(frozen=True)
class TestOnlyVerdict:
    """SLURM's answer to `sbatch --test-only`: would it accept the script?"""

    accepted: bool
    message: str


def parse_test_only(result: Result) -> TestOnlyVerdict:
    """sbatch --test-only answers on stderr: 'Job N to start at ...' or 'error: ...'."""
    text = "\n".join(s for s in (result.stderr.strip(), result.stdout.strip()) if s)
    accepted = result.returncode == 0 and "to start at" in text
    return TestOnlyVerdict(accepted=accepted, message=text or f"exit status {result.returncode}")


def sbatch_test_only(client: SlurmClient, script: str) -> TestOnlyVerdict:
    """Ask the SLURM in reach whether it would accept `script`, without queueing it."""
    result = client.run(["sbatch", "--test-only"], input=script, check=False)
    verdict = parse_test_only(result)
    if not verdict.accepted:
        low = verdict.message.lower()
        if any(m in low for m in _DOWN_MARKERS):
            raise _error_for(result)
    return verdict

"""The error hierarchy: library code raises these, the CLI boundary prints them."""

from __future__ import annotations

from collections.abc import Sequence


class HpctrainError(Exception):
    """A problem the user can fix; `fix` says how."""

    # True once the command printed its own --json answer holding this error (status: the
    # listing as last seen, with `error`): the error boundary then adds no second document.
    shown_in_json = False

    def __init__(self, what: str, fix: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.what} - {self.fix}" if self.fix else self.what


class ProfileError(HpctrainError):
    """A profile file is missing, malformed or inconsistent."""


class PlanError(HpctrainError):
    """A job request the cluster would refuse or that would break training."""

    def __init__(self, problems: list[str], *, fixes: Sequence[str] = (),
                 shape: Sequence[str] = ()) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))
        # The problems about the job's shape (partition, nodes, GPUs, CPUs, memory, time,
        # QOS): the ones a search over those options can fix.
        self.shape: list[str] = list(shape)
        # Computed fixes (changes the plan accepts), as data: `fix` joins them for the
        # Fix: line and the --json "fix", so every display of an error shows them.
        self.fixes: list[str] = list(fixes)

    @property
    def fix(self) -> str | None:
        return "; ".join(self.fixes) if self.fixes else None

    @fix.setter
    def fix(self, value: str | None) -> None:
        # Re-raisers pass `e.fix` along as one text; it stays the one fix.
        self.fixes = [value] if value else []


class UnsafeValueError(HpctrainError):
    """A value that cannot be made safe for a shell or an #SBATCH line."""


class SecretError(HpctrainError):
    """A secret (API key, token) would have been written into a script or the history."""


class SlurmError(HpctrainError):
    """A SLURM command failed; the message carries SLURM's own words."""


class SlurmUnavailableError(SlurmError):
    """SLURM is not installed, not reachable, or did not answer in time."""


class RemoteError(HpctrainError):
    """An ssh or sync step failed, or a login is misconfigured."""


class MasterDownError(SlurmUnavailableError):
    """A login's ssh master is not running (expired, killed, never opened)."""


class HistoryError(HpctrainError):
    """The job history database cannot be read or written."""


class DevClusterError(HpctrainError):
    """The local dev cluster cannot be started, stopped or inspected."""


class ConfigError(HpctrainError):
    """A trainer config is malformed or inconsistent with its environment."""

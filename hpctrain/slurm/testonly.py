"""`sbatch --test-only`: whether SLURM would accept a script, and when and where it would start
it, without queueing anything (`render --check`, `free`, a race's legs)."""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.errors import SlurmUnavailableError
from hpctrain.slurm import starts
from hpctrain.slurm.runner import Result, SlurmRunner


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


def sbatch_test_only(client: SlurmRunner, script: str) -> TestOnlyVerdict:
    """Ask the SLURM in reach whether it would accept `script`, without queueing it."""
    result = client.run(["sbatch", "--test-only"], input=script, check=False)
    verdict = parse_test_only(result)
    # A refusal is an answer; a SLURM that cannot be reached is an error.
    if not verdict.accepted and isinstance(err := client.error_for(result), SlurmUnavailableError):
        raise err
    return verdict

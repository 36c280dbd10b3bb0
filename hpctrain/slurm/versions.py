"""What differs between the SLURM versions hpctrain meets, named in one place (pure).

hpctrain is tested on Debian 12's SLURM 22.05 and Debian 13's 24.11 (docs/devcluster.md). The
differences it acts on:

- JSON output. `squeue --json` and `sacct --json` exist since 21.08, but their schema is the
  openapi plugin's of that release (22.05's v0.0.38 has no exit code in squeue's and names
  fields differently); from 23.02 the data_parser plugins give one schema per release with the
  fields read here, so JSON is used from 23.02 on and the text formats before. Sites that
  build SLURM without the JSON plugins refuse `--json`: HPCTRAIN_SLURM_JSON=0 keeps the text
  path there (and =1 forces JSON, for a site whose version string hpctrain cannot read).
- The node inventory. `sinfo --json` of 21.08 to 22.05 lists every node; from 23.02 it lists
  sinfo's groups of alike nodes instead (no `nodes` list), and `scontrol show node --json`
  lists every node with the same fields. So: scontrol's JSON from 23.02, sinfo's before,
  `scontrol --oneliner show node` below 21.08 or where JSON is turned off.
- Partitions stay on `scontrol --oneliner show partition` on every version: 24.11's
  `scontrol show partition --json` does not say which partition is the default (recorded in
  tests/profiles/recorded/slurm-24.11/*/partitions_json.json), and the text does.
- In JSON a job's state is a list (`["PENDING", "REQUEUED"]`): a base state and its flags,
  where the text prints the flag that wins (parsers_json.shown_state follows SLURM's order).
- 24.11's accounting says `None` for a pending job's reason in both forms, where 22.05's gives
  it (`Dependency`): the reason a user sees comes from squeue on every version.
- squeue's JSON carries an ended job's exit code; its text has none (then sacct is asked).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

SlurmVersion = tuple[int, int]

JSON_SINCE: SlurmVersion = (23, 2)
SINFO_JSON_SINCE: SlurmVersion = (21, 8)
JSON_VAR = "HPCTRAIN_SLURM_JSON"
NODES_TEXT_ARGV = ("scontrol", "--oneliner", "show", "node")

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> SlurmVersion:
    """`sinfo --version` ("slurm-wlm 22.05.8", "slurm 23.11.4") -> (22, 5)."""
    m = _VERSION.search(text)
    if m is None:
        raise ValueError(f"no SLURM version in {text.strip()[:80]!r}")
    return int(m.group(1)), int(m.group(2))


def version_text(version: SlurmVersion) -> str:
    """(24, 11) -> "24.11", (23, 2) -> "23.02", as SLURM names its releases."""
    return f"{version[0]}.{version[1]:02d}"


@dataclass(frozen=True)
class Dialect:
    """How hpctrain talks to one SLURM: its version and whether job queries use JSON."""

    version: SlurmVersion | None
    json: bool
    # Why this path: the version rule, or the variable that forced it.
    because: str
    # HPCTRAIN_SLURM_JSON decided, not the version: no JSON at all where it says 0.
    forced: bool = False

    def describe(self) -> str:
        """One line for --debug: which SLURM, which output, and why."""
        name = "unknown" if self.version is None else version_text(self.version)
        return f"SLURM {name}: {'JSON' if self.json else 'text'} output ({self.because})"

    def nodes_argv(self) -> tuple[str, ...]:
        """The command that lists every node with its shape, in the richest form read here."""
        if self.json:
            return ("scontrol", "show", "node", "--json")
        if not self.forced and self.version is not None and self.version >= SINFO_JSON_SINCE:
            return ("sinfo", "--json")
        return NODES_TEXT_ARGV


def dialect_for(version: SlurmVersion | None, env: Mapping[str, str]) -> Dialect:
    """The dialect for `version` (None: unknown), as HPCTRAIN_SLURM_JSON may force it."""
    forced = env.get(JSON_VAR, "").strip()
    if forced in ("0", "1"):
        return Dialect(version, forced == "1", f"{JSON_VAR}={forced}", forced=True)
    if version is None:
        return Dialect(None, False, "version unknown: the text formats read on every version")
    newer = version >= JSON_SINCE
    since = version_text(JSON_SINCE)
    return Dialect(version, newer, f"JSON since {since}" if newer else f"JSON only from {since}")

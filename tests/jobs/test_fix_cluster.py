"""A refusal's fix on `local` is accepted by the dev cluster's own sbatch (issue 52).

The plan's generative test (tests/unit/test_suggest_local.py) proves each fix accepted by the
profile; here each one offered for a few refused requests, pasted launch lines included, is
applied as a user would retype it and `render --check` asks the real SLURM (sbatch
--test-only): `local`'s limits are the dev cluster's own, so none asks for a third node.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.unit.test_suggest_local import accepted_parts

from .test_jobs_cluster import Cli

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster

REFUSED = [
    (["--gpus-per-node", "3"], ["python", "x.py"]),
    (["--nodes", "2"], ["torchrun", "--nproc_per_node", "4", "x.py"]),
    ([], ["torchrun", "--nproc_per_node", "4", "x.py"]),
    (["--nodes", "3"], ["python", "x.py"]),
    (["--time", "-5"], ["python", "x.py"]),
    (["--time", "5:00:00", "--gpus-per-node", "4"], ["srun", "-n", "4", "python", "x.py"]),
]


def _applied(options: list[str], command: list[str], part: str) -> list[str]:
    """The render options and command with one offered fix, as a user retypes them."""
    given = dict(zip(options[::2], options[1::2], strict=True))
    words = shlex.split(part.replace(", without ", " without "))
    while words:
        if words[0] == "--":
            command = words[1:]
            break
        if words[0] == "without":
            given.pop(words[1], None)
        else:
            given[words[0]] = words[1]
        words = words[2:]
    return [*(w for kv in given.items() for w in kv), "--", *command]


def test_every_fix_offered_on_local_is_accepted_by_the_dev_clusters_sbatch(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    checked = 0
    for options, command in REFUSED:
        refused = cli("render", "-P", "local", *options, "--", *command)
        assert refused.returncode == 1 and "Fix:" in refused.stderr, refused.stderr
        fix = refused.stderr.split("Fix: ", 1)[1].strip()
        assert "--nodes 3" not in fix, fix
        for part in accepted_parts(fix):
            args = _applied(options, command, part)
            r = cli("render", "-P", "local", "--account", "hpctrain-dev", "--check", *args)
            assert r.returncode == 0 and "SLURM accepts the script" in r.stderr, (args, r.stderr)
            checked += 1
    assert checked >= len(REFUSED)

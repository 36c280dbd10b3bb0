"""No slurm.conf readable here: every command gives the same diagnosis, and a failed submit
leaves nothing behind (issue 30, a newcomer's first hour)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hpctrain.errors import SlurmUnavailableError
from hpctrain.history import History
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.runner import Result
from hpctrain.slurm.transport import DOWN_FIX, SYSTEM_CONFS, LocalTransport

from .helpers import hpctrain, track

DIAGNOSIS = "no slurm.conf is readable here"
# What sbatch 22.05 says with neither a slurm.conf nor a configless site's DNS record.
NO_CONF = ("sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
           "sbatch: error: fetch_config: DNS SRV lookup failed\n"
           "sbatch: error: _establish_config_source: failed to fetch config\n"
           "sbatch: fatal: Could not establish a configuration source\n")


def _no_conf_here() -> bool:
    return shutil.which("sbatch") is not None and not any(os.path.exists(p) for p in SYSTEM_CONFS)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "HPCTRAIN_HOME")}
    return {**env, "HPCTRAIN_HOME": str(home)}


def test_a_missing_conf_is_diagnosed_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hpctrain.slurm.transport.SYSTEM_CONFS", ())
    error = SlurmClient(LocalTransport(None)).error_for(Result(("sbatch",), 1, "", NO_CONF))
    assert DIAGNOSIS in error.what and "SLURM_CONF is unset" in error.what
    assert error.fix is not None and "export SLURM_CONF" in error.fix
    missing = SlurmClient(LocalTransport("/nowhere/slurm.conf"))
    assert "SLURM_CONF names /nowhere/slurm.conf" in missing.unknown_cluster_error().what
    with pytest.raises(SlurmUnavailableError, match="SLURM_CONF names /nowhere/slurm.conf"):
        missing.run(["squeue"])


def test_a_readable_conf_keeps_slurms_words(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    error = SlurmClient(LocalTransport(str(conf))).error_for(Result(("sacct",), 1, "", NO_CONF))
    assert DIAGNOSIS not in error.what and "SLURM is not reachable" in error.what
    # The same fix as a controller found refusing connections.
    assert error.fix == DOWN_FIX


@pytest.mark.skipif(not _no_conf_here(), reason="needs SLURM's commands and no system slurm.conf")
def test_every_command_says_the_same_without_slurm_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env = tmp_path / "h", _env(tmp_path / "h")
    cancel = hpctrain("cancel", "--all", env=env, cwd=tmp_path)
    # Nothing to cancel is not a SLURM question.
    assert cancel.returncode == 0 and "No unfinished jobs to cancel" in cancel.stderr
    for args in (["submit", "--profile", "local", "--", "true"],
                 ["render", "--profile", "local", "--check", "--", "true"],
                 ["profiles", "check", "local"]):
        res = hpctrain(*args, env=env, cwd=tmp_path)
        assert res.returncode == 1 and DIAGNOSIS in res.stderr, (args, res.stderr)
        assert "resolve_ctls" not in res.stderr and "export SLURM_CONF" in res.stderr
    # The failed submit made no run directory, nor the folder it would have been in.
    assert not (tmp_path / "hpctrain-runs").exists()
    monkeypatch.setenv("HPCTRAIN_HOME", str(home))
    track(History(), "5", stdout_path=str(tmp_path / "5.out"))
    (tmp_path / "5.out").write_text("hello\n")
    for args in (["status"], ["cancel", "--all", "--yes"], ["logs", "-f", "5"]):
        res = hpctrain(*args, env=env, cwd=tmp_path)
        assert res.returncode == 1 and DIAGNOSIS in res.stderr, (args, res.stderr)

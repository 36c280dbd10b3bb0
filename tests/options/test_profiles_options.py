"""`profiles show` as text, `validate --json`, `discover --force/--output`, and `probe
--partition --account --qos` (a real probe job on the dev cluster, its sacct row checked)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from hpctrain.files.resources import profiles_dir
from tests.options.conftest import TWO_PARTITIONS

from .helpers import sacct

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle


def hpctrain(cwd: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """`python -m hpctrain ARGS`; without `env`, with a fresh HPCTRAIN_HOME under `cwd`."""
    import os

    env = env or {**os.environ, "HPCTRAIN_HOME": str(cwd / "home")}
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)


def test_show_as_text_is_the_resolved_profile_as_yaml(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: local\nname: mine\ndescription: 'my copy of local'\n")
    res = hpctrain(tmp_path, "profiles", "show", str(mine))
    assert res.returncode == 0, res.stderr
    shown = yaml.safe_load(res.stdout)
    shipped = yaml.safe_load((profiles_dir() / "local.yaml").read_text())
    # Its own fields, and what `extends: local` brought: local's partition as the file has it.
    assert (shown["name"], shown["description"]) == ("mine", "my copy of local")
    assert shown["cluster"] == shipped["cluster"]
    want = shipped["partitions"][0]
    got = shown["partitions"][0]
    assert {k: got[k] for k in want} == want


def test_validate_json_says_valid_with_name_and_path(tmp_path: Path) -> None:
    res = hpctrain(tmp_path, "profiles", "validate", str(TWO_PARTITIONS), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"valid": True, "name": "optb-two",
                                      "path": str(TWO_PARTITIONS)}
    # Without --json the verdict is a line for people, on stderr.
    text = hpctrain(tmp_path, "profiles", "validate", str(TWO_PARTITIONS))
    assert text.returncode == 0 and text.stdout == "" and "valid" in text.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(TWO_PARTITIONS.read_text().replace("gpu_request:", "gpu_requets:"))
    refused = hpctrain(tmp_path, "profiles", "validate", str(bad), "--json")
    verdict = json.loads(refused.stdout)
    assert refused.returncode == 1 and verdict["valid"] is False and verdict["path"] == str(bad)
    assert [p for p in verdict["problems"] if "gpu_requets" in p] == [
        f"{bad}:9: gpu_requets: unknown field (did you mean gpu_request?)"], verdict


def test_discover_overwrites_output_only_with_force(two_partitions: DevClusterHandle,
                                                    tmp_path: Path) -> None:
    env = two_partitions.env(HPCTRAIN_HOME=str(tmp_path / "home"))
    out = tmp_path / "drafted profile.yaml"
    out.write_text("# mine, keep me\n")
    refused = hpctrain(tmp_path, "profiles", "discover", "drafted", "--output", str(out),
                       env=env)
    assert refused.returncode == 1 and "--force" in refused.stderr, refused.stderr
    assert out.read_text() == "# mine, keep me\n"
    res = hpctrain(tmp_path, "profiles", "discover", "drafted", "-o", str(out), "--force",
                   env=env)
    assert res.returncode == 0, res.stderr
    draft = yaml.safe_load(out.read_text())
    # What the live cluster has: the two partitions the dev cluster emulates.
    assert draft["name"] == "drafted"
    assert sorted(p["name"] for p in draft["partitions"]) == ["batch", "debug"]


def test_probe_partition_account_qos_reach_the_job(two_partitions: DevClusterHandle,
                                                   tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config" / "profiles").mkdir(parents=True)
    # probe takes a profile name: the file goes into this home's profile directory.
    shutil.copy(TWO_PARTITIONS, home / "config" / "profiles" / "optb-two.yaml")
    env = two_partitions.env(HPCTRAIN_HOME=str(home))
    res = hpctrain(tmp_path, "profiles", "probe", "optb-two", "--partition", "batch",
                   "--account", "hpctrain-test", "--qos", "standby", "--json", env=env)
    assert res.returncode == 0, res.stderr
    job_id = str(json.loads(res.stdout)["job_id"])
    row = sacct(two_partitions, job_id, "Partition,Account,QOS,State")
    # Not the defaults (debug, hpctrain-dev, normal): the options' values.
    assert list(row.values()) == ["batch", "hpctrain-test", "standby", "COMPLETED"]

"""Errors in a profile that extends another name the user's file, line and key (issue 30)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpctrain.errors import ProfileError
from hpctrain.profiles import load_profile
from hpctrain.profiles.where import key_text, user_steps
from tests.jobs.helpers import hpctrain
from tests.unit.test_profiles import _home, user_profile

__all__ = ["_home"]

BAD_TYPE = """extends: gilbreth
partitions:
  - name: a100-80gb
    node_types:
      - name: x
        cpus: 8
  - name: mine
    gpus_per_node: 2
"""


def test_merged_indices_become_the_users_names() -> None:
    merged = {"partitions": [{"name": "a"}, {"name": "b", "node_types": [{"cpus": 1}]}],
              "sources": ["x"]}
    steps = user_steps(merged, ("partitions", 1, "node_types", 0, "gpus"))
    assert key_text(steps) == "partitions[name=b].node_types[0].gpus"
    assert key_text(user_steps(merged, ("sources", 0))) == "sources[0]"
    assert key_text([]) == "(top level)"


def test_extending_profile_errors_point_at_the_users_lines(_home: Path) -> None:
    path = user_profile(_home, "mygil", BAD_TYPE)
    with pytest.raises(ProfileError) as e:
        load_profile("mygil")
    lines = e.value.what.splitlines()
    assert f"{path}:5: partitions[name=a100-80gb].node_types[name=x].gpus: Field required" \
        in lines
    assert f"{path}:7: partitions[name=mine].max_time: Field required" in lines
    assert "partitions.5" not in e.value.what and "node_types.3" not in e.value.what
    assert "hpctrain profiles show gilbreth" in e.value.fix


def test_cli_validate_and_render_name_the_file_line_and_base(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(BAD_TYPE)
    env = {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")}
    for argv in (("profiles", "validate", str(f)), ("render", "--profile", str(f))):
        r = hpctrain(*argv, env=env, cwd=tmp_path)
        assert r.returncode == 1, r.stderr
        assert f"{f}:5: partitions[name=a100-80gb].node_types[name=x].mem_mb" in r.stderr
        assert "hpctrain profiles show gilbreth" in r.stderr
        assert "show raven" not in r.stderr


def test_yaml_syntax_error_says_where_and_what(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("extends: gilbreth\npartitions: [a: b: c]\n")
    with pytest.raises(ProfileError) as e:
        load_profile(str(f))
    assert e.value.what.startswith(f"{f}: line 2, column 18: not valid YAML: did not find "
                                   "expected ',' or ']'")
    assert "line 2, column 18" in e.value.fix and e.value.fix != "fix the syntax"

"""YAML written without PyYAML reads back through PyYAML as the same data."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpctrain.files import yamlwrite
from hpctrain.profiles.loader import list_profiles, load_profile, profile_from_text

HOSTILE = [
    "", " ", "a b", " lead", "trail ", "yes", "No", "ON", "off", "TRUE", "null", "Null", "~",
    "y", "n", "0", "007", "0x1f", "0o17", "1_000", "1:20", "1.5", "1e5", ".inf", "-.inf", ".nan",
    "2026-11-28", "2026-11-28 10:00:00", "<<", "=", "-", "- x", "-x", "? x", "a: b", "a #b",
    "#c", "&anchor", "*alias", "!tag", "|", ">", "%TAG", "@x", "`x`", "{a: 1}", "[1, 2]",
    "'single'", '"double"', "back\\slash", "tab\there", "line\nbreak", "cr\rx", "nul\x00",
    "bell\x07", "del\x7f", "nel\x85", "nbsp\xa0", "ls\u2028ps\u2029", "bom\ufeff",
    "caf\u00e9", "\u65e5\u672c", "emoji \U0001f600", "surrogate \udc80", "$(rm -rf /)",
    "; echo hi", "24:00:00", "/abs/path", "a/b.c-d_e+f", "--flag", "%", "...", "---",
]


def _back(data: dict[str, Any]) -> Any:
    return yaml.safe_load(yamlwrite.dump(data))


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_string_comes_back_whole_as_value_and_key(text: str) -> None:
    data = {"value": text, "list": [text, [text]], text: {"nested": text}}
    assert _back(data) == data


def test_numbers_booleans_nulls_and_empty_containers_keep_their_types() -> None:
    data = {"int": -3, "big": 10**30, "float": 1e-05, "f2": 2.5, "f3": -1e20, "f4": 3.0,
            "inf": float("inf"), "ninf": float("-inf"), "t": True, "f": False, "none": None,
            "empty_list": [], "empty_map": {}, "tuple": (1, "a"),
            "deep": [[1, [2, {}]], {"a": [{"b": None}]}, []]}
    back = _back(data)
    assert back == {**data, "tuple": [1, "a"]}
    assert type(back["float"]) is float and type(back["f4"]) is float
    assert _back({"nan": float("nan")})["nan"] != _back({"nan": float("nan")})["nan"]


def test_random_strings_come_back_whole() -> None:
    alphabet = "ab-_:#'\" \t\n\\/.0123456789yYnN~{}[],&*!|>%@`\x00\x85\u2028\ufeff\u00e9\U0001f600"
    rng = random.Random(43)
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert _back({"k": text, text: [text]}) == {"k": text, text: [text]}, repr(text)


def test_what_is_not_plain_data_is_refused() -> None:
    with pytest.raises(TypeError):
        yamlwrite.dump({"path": Path("/x")})
    with pytest.raises(TypeError):
        yamlwrite.dump({1: "x"})  # type: ignore[dict-item]


@pytest.mark.parametrize("name", [p.name for p in list_profiles()])
def test_every_shipped_profile_is_read_back_as_the_same_profile(name: str) -> None:
    profile = load_profile(name)
    data = dataclasses.asdict(profile)
    text = yamlwrite.dump(data)
    assert yaml.safe_load(text) == yaml.safe_load(yaml.safe_dump(data, sort_keys=False))
    assert profile_from_text(text, "profile.yaml") == profile

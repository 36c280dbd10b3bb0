"""The flight records' view (issue 51) on records the rank hook wrote for 4 gloo ranks of
torch 2.13 (recorded/flight-recorder-torch-2.13): rank 1 asleep before its third all_reduce
(`behind`), and rank 1 all_reducing 3 elements where the others gave 1 (`mismatch`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpctrain.monitor import collectives

RECORDED = Path(__file__).resolve().parent / "recorded" / "flight-recorder-torch-2.13"


def _load(case: str) -> tuple[dict[int, Any], dict[int, str]]:
    """Each rank's flight record and node, as the hook wrote them."""
    records, nodes = {}, {}
    for path in sorted((RECORDED / case).glob("*.json")):
        row = json.loads(path.read_text())
        records[row["rank"]], nodes[row["rank"]] = row["trace"], row["node"]
    return records, nodes


def test_the_rank_behind_is_named_with_its_last_collective() -> None:
    records, nodes = _load("behind")
    view = collectives.read(records, registered=range(4))
    assert view.group == "default_pg" and view.missing == () and view.mismatch is None
    assert [(r, e.name) for r, e in view.behind.items()] == [(1, "all_reduce #2")]
    assert view.waiting == [0, 2, 3]
    assert view.newest is not None and view.newest.name == "all_reduce #3"
    assert view.describe() == ("rank 1 never entered all_reduce #3 (its last: all_reduce #2); "
                               "ranks 0, 2, 3 waited in it")
    assert view.describe(nodes=nodes) == ("rank 1 on node1 never entered all_reduce #3 (its "
                                          "last: all_reduce #2); ranks 0, 2, 3 waited in it")


def test_the_mismatched_collective_names_the_odd_rank_and_its_shape() -> None:
    records, nodes = _load("mismatch")
    view = collectives.read(records, registered=range(4))
    assert view.mismatch is not None and view.mismatch.entry == "all_reduce #3"
    assert view.mismatch.by_rank[1] == "all_reduce [[3]] Float"
    assert {view.mismatch.by_rank[r] for r in (0, 2, 3)} == {"all_reduce [[1]] Float"}
    # A mismatch beats the rank behind (rank 1 stopped at #3, the others went on to #4).
    text = ("mismatched collective all_reduce #3: ranks 0, 2, 3 gave all_reduce [[1]] Float; "
            "rank 1 gave all_reduce [[3]] Float")
    assert view.describe() == text and view.describe(nodes=nodes) == text


def test_a_rank_without_a_record_is_missing() -> None:
    records, nodes = _load("behind")
    del records[1]
    view = collectives.read(records, registered=range(4))
    assert view.missing == (1,) and view.behind == {}
    assert view.describe(nodes=nodes) == (
        "ranks 0, 2, 3 waited in all_reduce #3; rank 1 on node1 wrote no flight record (it "
        "never answered)")
    # A record of None (the rank answered nothing readable) is missing alike.
    assert collectives.read({**records, 1: None}, registered=range(4)).missing == (1,)
    # Without the registry, nobody is known to be missing.
    assert collectives.read(records).missing == ()


def test_no_record_at_all() -> None:
    # Rank 1 answered with an empty record: not missing, but nothing to read either.
    view = collectives.read({0: None, 1: {"entries": []}}, registered=[0, 1])
    assert view.newest is None and view.missing == (0,)
    assert view.describe() == "no rank's flight record was read"


def test_ranks_that_agree() -> None:
    records, _ = _load("behind")
    records[1] = records[0]  # rank 1 as far as rank 0: every rank in all_reduce #3
    view = collectives.read(records, registered=range(4))
    assert view.behind == {} and view.mismatch is None and view.waiting == [0, 1, 2, 3]
    assert view.describe() == "every rank's last collective is all_reduce #3"


def test_entries_skip_point_to_point_calls_and_bad_rows() -> None:
    records, _ = _load("behind")
    real = records[0]["entries"]
    assert [e.name for e in collectives.entries(records[0])] == [
        "all_reduce #1", "all_reduce #2", "all_reduce #3"]
    p2p = {**real[0], "is_p2p": True, "profiling_name": "gloo:send", "collective_seq_id": 0,
           "p2p_seq_id": 1}
    bad = ["not a row", None, {**real[1], "collective_seq_id": None},
           {**real[1], "collective_seq_id": 0}, {**real[1], "collective_seq_id": "2"}]
    got = collectives.entries({"entries": [p2p, *bad, real[2]]})
    assert [(e.group, e.name, e.sizes, e.dtypes) for e in got] == [
        ("default_pg", "all_reduce #3", "[[1]]", "Float")]
    # A row without process_group falls back on pg_id; no dtypes is an empty text.
    row = {k: v for k, v in real[0].items() if k not in ("process_group", "input_dtypes")}
    assert [(e.group, e.dtypes) for e in collectives.entries({"entries": [row]})] == [("0", "")]
    assert collectives.entries(None) == [] and collectives.entries({}) == []
    assert collectives.entries({"entries": None}) == []

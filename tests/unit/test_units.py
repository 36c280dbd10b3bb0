import pytest

from hpctrain.errors import HpctrainError
from hpctrain.studies import scaling_table
from hpctrain.submission import race as alternatives
from hpctrain.values.units import (
    Topology,
    format_time,
    parse_mem_mb,
    parse_time_seconds,
    parse_topologies,
    parse_topology,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("1:30", 90),
        ("01:00:00", 3600),
        ("23:59:00", 86340),
        ("2-00:00:00", 172800),
        ("1-12", 129600),
        ("1-01:30", 91800),
        ("14-00:00:00", 14 * 86400),
    ],
)
def test_parse_time(text: str, seconds: int) -> None:
    assert parse_time_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "-1", "1-", "01:61:00", "1:00:75", "x-1"])
def test_parse_time_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_seconds(text)


def test_format_time_round_trip() -> None:
    for s in (60, 3600, 86340, 86400, 14 * 86400 + 5):
        assert parse_time_seconds(format_time(s)) == s
    assert format_time(86400) == "1-00:00:00"


@pytest.mark.parametrize(
    ("text", "mb"),
    [("500000", 500000), ("125000M", 125000), ("120G", 122880), ("1T", 1048576), ("2gb", 2048)],
)
def test_parse_mem(text: str, mb: int) -> None:
    assert parse_mem_mb(text) == mb


@pytest.mark.parametrize("text", ["", "lots", "12X", "-5"])
def test_parse_mem_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_mem_mb(text)


@pytest.mark.parametrize(("text", "nodes", "gpus"), [
    ("2x4", 2, 4), (" 1 X 8 ", 1, 8), ("9999x64", 9999, 64), ("01x1", 1, 1),
])
def test_parse_topology(text: str, nodes: int, gpus: int) -> None:
    assert parse_topology(text) == Topology(nodes, gpus)


# Full-width digits pass str.isdigit(); SLURM would read none of them.
@pytest.mark.parametrize("text", [
    "", "2", "x4", "2x", "1x0", "0x2", "-1x2", "10000x1", "1x65", "99999x1", "\uff11x2",
    "1x2;rm", "$(id)x1", "1x1x1", "1.5x2",
])
def test_parse_topology_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_topology(text)


def test_parse_topologies_keeps_order_and_refuses_repeats() -> None:
    assert [t.label for t in parse_topologies("2x1, 1x2")] == ["2x1", "1x2"]
    with pytest.raises(ValueError, match="1x2 is listed twice"):
        parse_topologies("1x2,1X2")


@pytest.mark.parametrize("bad", ["1x0", "99999x1", "\uff11x2", "1x1,"])
def test_scale_and_first_of_refuse_the_same_topologies(bad: str) -> None:
    for parse in (scaling_table.parse_topologies, alternatives.parse_first_of):
        with pytest.raises(HpctrainError, match="NODESxGPUS|out of range"):
            parse(f"1x1,{bad}" if bad != "1x1," else bad)

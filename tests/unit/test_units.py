import pytest

from hpctrain.units import format_time, parse_mem_mb, parse_time_seconds


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

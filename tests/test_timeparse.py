from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mqadmin.errors import UsageError
from mqadmin.timeparse import format_time, parse_duration_ms, parse_time, resolve_tz

NOW = 1_700_000_000_123
UTC8 = timezone(timedelta(hours=8))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("1700000000123", 1_700_000_000_123),
        ("-15m", NOW - 15 * 60_000),
        ("-2h", NOW - 2 * 3_600_000),
        ("-1d", NOW - 86_400_000),
        ("2023-11-15#06:13:20:123", 1_700_000_000_123),
        ("20231115061320123", 1_700_000_000_123),
        ("2023-11-15T06:13:20.123", 1_700_000_000_123),
        ("2023-11-14T22:13:20.123Z", 1_700_000_000_123),
        ("2023-11-15T00:13:20.123+02:00", 1_700_000_000_123),
    ],
)
def test_accepted_formats_resolve_in_the_given_zone(text: str, expected: int) -> None:
    assert parse_time(text, now=NOW, tz=UTC8) == expected


def test_without_tz_naive_times_are_local() -> None:
    local = datetime(2024, 5, 1, 9, 40).astimezone()
    assert parse_time("2024-05-01T09:40:00", now=NOW) == int(local.timestamp() * 1000)


def test_ten_digits_is_refused_as_seconds_with_a_hint() -> None:
    with pytest.raises(UsageError, match=r"seconds.*1700000000000"):
        parse_time("1700000000", now=NOW)


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01T00:00:00", "12345", "2024-02-30#10:00:00:000", "-5y"])
def test_garbage_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_time(text, now=NOW)


def test_tz_names_and_offsets() -> None:
    assert resolve_tz("+08:00") == UTC8
    assert resolve_tz("UTC") == timezone.utc
    assert resolve_tz("Asia/Shanghai") is not None
    with pytest.raises(UsageError):
        resolve_tz("Mars/Olympus")


def test_format_echoes_iso_with_offset() -> None:
    assert format_time(1_700_000_000_123, UTC8) == "2023-11-15T06:13:20.123+08:00"


@pytest.mark.parametrize(("text", "ms"), [("5m", 300_000), ("30s", 30_000), ("1500", 1500), ("2h", 7_200_000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


def test_bad_duration() -> None:
    with pytest.raises(UsageError):
        parse_duration_ms("soon")


def test_a_negative_number_is_no_time() -> None:
    """-1000000000000 was read as epoch ms: 1938, silently."""
    for text in ("-1000000000000", "-100000000000", "-5"):
        with pytest.raises(UsageError, match="a negative number is no time .* e.g. -15m"):
            parse_time(text, now=0)


def test_a_local_time_the_dst_change_skips_or_repeats_says_which_instant_it_took() -> None:
    berlin = resolve_tz("Europe/Berlin")
    said: list[str] = []
    gap = parse_time("2026-03-29T02:30", tz=berlin, warn=said.append)
    assert format_time(gap, berlin) == "2026-03-29T03:30:00.000+02:00"
    assert said == [
        "2026-03-29T02:30 does not exist in Europe/Berlin (the clocks skip it at the DST change): "
        "took 2026-03-29T03:30:00.000+02:00"
    ]
    said.clear()
    twice = parse_time("2026-10-25#02:30:00:000", tz=berlin, warn=said.append)
    assert format_time(twice, berlin) == "2026-10-25T02:30:00.000+02:00"
    assert said == [
        "2026-10-25T02:30 happens twice in Europe/Berlin (the clocks go back at the DST change): took the "
        "first, 2026-10-25T02:30:00.000+02:00 (the second is 2026-10-25T02:30:00.000+01:00); write the "
        "offset to choose"
    ]
    said.clear()
    for plain in ("2026-06-01T02:30", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30"):
        parse_time(plain, tz=berlin, warn=said.append)
    assert said == []

"""Previews: local times and the DST note on each adjusted fire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedulerstream.errors import ValidationError
from schedulerstream.timing import preview

NY = "America/New_York"


def rows(
    expression: str, zone: str, after: datetime, count: int, **policy: str
) -> list[tuple[str, str, str]]:
    return [
        (e.utc.strftime("%Y-%m-%dT%H:%M:%SZ"), e.local.isoformat(), e.note)
        for e in preview(expression, zone, after, count, **policy)  # type: ignore[arg-type]
    ]


def test_gap_fire_after() -> None:
    assert rows("30 2 * * *", NY, datetime(2024, 3, 9, 12, tzinfo=UTC), 2) == [
        (
            "2024-03-10T07:00:00Z",
            "2024-03-10T03:00:00-04:00",
            "02:30 does not exist (DST gap); fired at 03:00",
        ),
        ("2024-03-11T06:30:00Z", "2024-03-11T02:30:00-04:00", ""),
    ]


def test_collapsed_gap_matches_are_listed() -> None:
    [entry] = rows("0,30 2,3 * * *", NY, datetime(2024, 3, 10, tzinfo=UTC), 1)
    assert entry[2] == "02:00, 02:30 do not exist (DST gap); fired at 03:00"
    [many] = rows("* 2 * * *", NY, datetime(2024, 3, 10, tzinfo=UTC), 1, dst_gap="fire_after")
    assert many[2] == "02:00–02:59 (60 times) do not exist (DST gap); fired at 03:00"
    [seconds] = rows("30 30 2 * * *", NY, datetime(2024, 3, 10, tzinfo=UTC), 1)
    assert seconds[2] == "02:30:30 does not exist (DST gap); fired at 03:00"


def test_skipped_gap_is_noted_on_the_next_fire() -> None:
    assert rows("30 2 * * *", NY, datetime(2024, 3, 9, 12, tzinfo=UTC), 1, dst_gap="skip") == [
        (
            "2024-03-11T06:30:00Z",
            "2024-03-11T02:30:00-04:00",
            "02:30 does not exist (DST gap); skipped",
        )
    ]
    hourly = rows("0 * * * *", NY, datetime(2024, 3, 10, 6, 30, tzinfo=UTC), 1)
    assert hourly[0][2] == "02:00 does not exist (DST gap); skipped"


def test_fall_back_notes() -> None:
    assert rows("30 1 * * *", NY, datetime(2024, 11, 3, tzinfo=UTC), 2) == [
        (
            "2024-11-03T05:30:00Z",
            "2024-11-03T01:30:00-04:00",
            "01:30 occurs twice (DST fall-back); fired at the first occurrence",
        ),
        ("2024-11-04T06:30:00Z", "2024-11-04T01:30:00-05:00", ""),
    ]
    assert rows("30 1 * * *", NY, datetime(2024, 11, 3, tzinfo=UTC), 2, dst_repeat="both") == [
        (
            "2024-11-03T05:30:00Z",
            "2024-11-03T01:30:00-04:00",
            "01:30 occurs twice (DST fall-back); first occurrence",
        ),
        (
            "2024-11-03T06:30:00Z",
            "2024-11-03T01:30:00-05:00",
            "second occurrence of 01:30 (DST fall-back)",
        ),
    ]


def test_midnight_zones() -> None:
    [beirut] = rows("@daily", "Asia/Beirut", datetime(2024, 3, 30, 12, tzinfo=UTC), 1)
    assert beirut == (
        "2024-03-30T22:00:00Z",
        "2024-03-31T01:00:00+03:00",
        "00:00 does not exist (DST gap); fired at 01:00",
    )
    havana = rows("@daily", "America/Havana", datetime(2024, 11, 3, tzinfo=UTC), 1)
    assert havana[0][2] == "00:00 occurs twice (DST fall-back); fired at the first occurrence"


def test_after_with_an_offset_and_no_offset() -> None:
    eastern = timezone(timedelta(hours=-5))
    assert rows("0 0 * * *", "UTC", datetime(2024, 1, 1, 20, tzinfo=eastern), 1)[0][0] == (
        "2024-01-03T00:00:00Z"
    )
    with pytest.raises(ValidationError) as caught:
        preview("0 0 * * *", "UTC", datetime(2024, 1, 1), 1)
    assert caught.value.field == "after"


def test_microseconds_in_after() -> None:
    after = datetime(2024, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)
    assert rows("* * * * * *", "UTC", after, 1)[0][0] == "2024-01-01T00:00:01Z"
    assert preview("0 0 30 2 *", "UTC", after, 3) == []

"""Zone lookup errors and the offset timeline against a plain zoneinfo scan."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedulerstream.errors import UnknownTimeZoneError
from schedulerstream.timing import get_zone
from schedulerstream.timing.zones import FixedTimeline, timeline_for


@pytest.mark.parametrize(
    "name",
    ["Mars/Olympus", "", "America", "../etc/passwd", "/etc/localtime", "localtime", "Factory"],
)
def test_unknown_zones(name: str) -> None:
    with pytest.raises(UnknownTimeZoneError) as caught:
        get_zone(name)
    assert caught.value.field == "timezone"
    assert caught.value.message.startswith(f"unknown IANA time zone {name!r}")


def test_wrong_case_suggests_the_real_name() -> None:
    with pytest.raises(UnknownTimeZoneError) as caught:
        get_zone("america/new_york")
    assert "did you mean 'America/New_York'?" in caught.value.message


def test_known_zones() -> None:
    assert get_zone("UTC").key == "UTC"
    assert get_zone("America/New_York").key == "America/New_York"
    assert isinstance(timeline_for("UTC"), FixedTimeline)
    assert timeline_for("Etc/GMT-14").offset_at(0) == 14 * 3600


@pytest.mark.parametrize(
    "name", ["America/New_York", "Australia/Lord_Howe", "Asia/Beirut", "Pacific/Apia"]
)
def test_timeline_matches_zoneinfo_scan(name: str) -> None:
    zone = get_zone(name)
    start = int(datetime(2010, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2013, 1, 1, tzinfo=UTC).timestamp())
    scanned = []
    previous = datetime.fromtimestamp(start, zone).utcoffset()
    for second in range(start + 900, end, 900):
        offset = datetime.fromtimestamp(second, zone).utcoffset()
        if offset != previous:
            scanned.append(second)
        previous = offset
    timeline = timeline_for(name)
    found = [t.instant for t in timeline.transitions(start, end)]
    # Every transition of these zones is on a quarter hour.
    assert found == scanned
    for instant in found:
        segment = timeline.segment(instant)
        assert segment.start == instant
        assert segment.prev_offset == timeline.offset_at(instant - 1)
        assert segment.offset == timeline.offset_at(instant)
        assert timeline.segment(instant - 1).end == instant

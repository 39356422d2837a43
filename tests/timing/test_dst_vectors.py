"""Hand-written DST vectors: UTC instants worked out from each zone's rules, not from the engine.

Rules used (2024 unless noted):
- America/New_York: EST -5 / EDT -4; forward Sun Mar 10 02:00→03:00 (07:00Z), back Sun Nov 3
  02:00→01:00 (06:00Z), so local 01:00-01:59 is 05:00-05:59Z then 06:00-06:59Z.
- Europe/London: GMT 0 / BST +1; forward Sun Mar 31 01:00→02:00 (01:00Z), back Sun Oct 27
  02:00→01:00 (01:00Z), local 01:00-01:59 is 00:00-00:59Z then 01:00-01:59Z.
- Australia/Lord_Howe: +10:30 / +11 (30-minute shift); back Sun Apr 7 02:00→01:30 (Apr 6
  15:00Z), local 01:30-01:59 twice; forward Sun Oct 6 02:00→02:30 (Oct 5 15:30Z).
- America/Santiago: -4 / -3; back Sun Apr 7 00:00→Sat 23:00 (03:00Z), local Sat 23:00-23:59
  twice; forward Sun Sep 8 00:00→01:00 (04:00Z), midnight does not exist.
- America/Havana: -5 / -4; forward Sun Mar 10 00:00→01:00 (05:00Z), midnight does not exist;
  back Sun Nov 3 01:00→00:00 (05:00Z), midnight occurs twice (04:00Z and 05:00Z).
- Asia/Beirut: +2 / +3; forward Sun Mar 31 00:00→01:00 (Mar 30 22:00Z); back Sun Oct 27
  00:00→Sat 23:00 (Oct 26 21:00Z), local Sat 23:00-23:59 twice.
- Pacific/Apia 2011: -10 → +14 at Dec 30 00:00 local (10:00Z): the whole of Dec 30 is skipped.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from schedulerstream.timing import parse_cron


def z(text: str) -> int:
    """UTC epoch microseconds of an ISO 8601 literal ending in Z."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * 1_000_000


NY = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"
SANTIAGO = "America/Santiago"
HAVANA = "America/Havana"
BEIRUT = "Asia/Beirut"

# (expression, zone, dst_gap, dst_repeat, after, expected instants)
VECTORS: list[tuple[str, str, str, str, str, list[str]]] = [
    # --- America/New_York, spring forward ---
    (
        "30 2 * * *",
        NY,
        "auto",
        "auto",
        "2024-03-09T00:00:00Z",
        ["2024-03-09T07:30:00Z", "2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"],
    ),
    (
        "30 2 * * *",
        NY,
        "skip",
        "auto",
        "2024-03-09T00:00:00Z",
        ["2024-03-09T07:30:00Z", "2024-03-11T06:30:00Z"],
    ),
    (
        "0,30 2,3 * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T00:00:00Z",
        ["2024-03-10T07:00:00Z", "2024-03-10T07:30:00Z", "2024-03-11T06:00:00Z"],
    ),
    (
        "0 * * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T05:30:00Z",
        ["2024-03-10T06:00:00Z", "2024-03-10T07:00:00Z", "2024-03-10T08:00:00Z"],
    ),
    (
        "30 * * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T06:00:00Z",
        ["2024-03-10T06:30:00Z", "2024-03-10T07:30:00Z"],
    ),
    (
        "30 * * * *",
        NY,
        "fire_after",
        "auto",
        "2024-03-10T06:00:00Z",
        ["2024-03-10T06:30:00Z", "2024-03-10T07:00:00Z", "2024-03-10T07:30:00Z"],
    ),
    (
        "*/15 * * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T06:40:00Z",
        ["2024-03-10T06:45:00Z", "2024-03-10T07:00:00Z", "2024-03-10T07:15:00Z"],
    ),
    (
        "15 30 2 * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T00:00:00Z",
        ["2024-03-10T07:00:00Z", "2024-03-11T06:30:15Z"],
    ),
    (
        "*/20 30 2 * * *",
        NY,
        "auto",
        "auto",
        "2024-03-10T00:00:00Z",
        ["2024-03-11T06:30:00Z", "2024-03-11T06:30:20Z", "2024-03-11T06:30:40Z"],
    ),
    # --- America/New_York, fall back ---
    (
        "30 1 * * *",
        NY,
        "auto",
        "auto",
        "2024-11-02T00:00:00Z",
        ["2024-11-02T05:30:00Z", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"],
    ),
    (
        "30 1 * * *",
        NY,
        "auto",
        "both",
        "2024-11-02T00:00:00Z",
        [
            "2024-11-02T05:30:00Z",
            "2024-11-03T05:30:00Z",
            "2024-11-03T06:30:00Z",
            "2024-11-04T06:30:00Z",
        ],
    ),
    (
        "0 * * * *",
        NY,
        "auto",
        "auto",
        "2024-11-03T04:30:00Z",
        ["2024-11-03T05:00:00Z", "2024-11-03T06:00:00Z", "2024-11-03T07:00:00Z"],
    ),
    (
        "0 * * * *",
        NY,
        "auto",
        "first",
        "2024-11-03T04:30:00Z",
        ["2024-11-03T05:00:00Z", "2024-11-03T07:00:00Z"],
    ),
    (
        "*/15 * * * *",
        NY,
        "auto",
        "auto",
        "2024-11-03T05:40:00Z",
        [
            "2024-11-03T05:45:00Z",
            "2024-11-03T06:00:00Z",
            "2024-11-03T06:15:00Z",
            "2024-11-03T06:30:00Z",
            "2024-11-03T06:45:00Z",
            "2024-11-03T07:00:00Z",
        ],
    ),
    (
        "15 30 1 * * *",
        NY,
        "auto",
        "auto",
        "2024-11-03T00:00:00Z",
        ["2024-11-03T05:30:15Z", "2024-11-04T06:30:15Z"],
    ),
    (
        "*/20 0 1 * * *",
        NY,
        "auto",
        "auto",
        "2024-11-03T00:00:00Z",
        [
            "2024-11-03T05:00:00Z",
            "2024-11-03T05:00:20Z",
            "2024-11-03T05:00:40Z",
            "2024-11-03T06:00:00Z",
            "2024-11-03T06:00:20Z",
            "2024-11-03T06:00:40Z",
            "2024-11-04T06:00:00Z",
        ],
    ),
    # --- Europe/London ---
    (
        "30 1 * * *",
        LONDON,
        "auto",
        "auto",
        "2024-03-30T00:00:00Z",
        ["2024-03-30T01:30:00Z", "2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"],
    ),
    (
        "*/30 1 * * *",
        LONDON,
        "auto",
        "auto",
        "2024-03-30T23:00:00Z",
        ["2024-04-01T00:00:00Z", "2024-04-01T00:30:00Z"],
    ),
    (
        "30 1 * * *",
        LONDON,
        "auto",
        "auto",
        "2024-10-26T00:00:00Z",
        ["2024-10-26T00:30:00Z", "2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"],
    ),
    (
        "30 1 * * *",
        LONDON,
        "fire_after",
        "both",
        "2024-10-26T12:00:00Z",
        ["2024-10-27T00:30:00Z", "2024-10-27T01:30:00Z", "2024-10-28T01:30:00Z"],
    ),
    (
        "*/30 1 * * *",
        LONDON,
        "auto",
        "auto",
        "2024-10-26T12:00:00Z",
        [
            "2024-10-27T00:00:00Z",
            "2024-10-27T00:30:00Z",
            "2024-10-27T01:00:00Z",
            "2024-10-27T01:30:00Z",
            "2024-10-28T01:00:00Z",
        ],
    ),
    # --- Australia/Lord_Howe (30-minute shifts) ---
    (
        "15 2 * * *",
        LORD_HOWE,
        "auto",
        "auto",
        "2024-10-04T00:00:00Z",
        ["2024-10-04T15:45:00Z", "2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"],
    ),
    (
        "15 2 * * *",
        LORD_HOWE,
        "skip",
        "auto",
        "2024-10-04T00:00:00Z",
        ["2024-10-04T15:45:00Z", "2024-10-06T15:15:00Z"],
    ),
    (
        "0 * * * *",
        LORD_HOWE,
        "auto",
        "auto",
        "2024-10-05T14:00:00Z",
        ["2024-10-05T14:30:00Z", "2024-10-05T16:00:00Z"],
    ),
    (
        "0 * * * *",
        LORD_HOWE,
        "fire_after",
        "auto",
        "2024-10-05T14:00:00Z",
        ["2024-10-05T14:30:00Z", "2024-10-05T15:30:00Z", "2024-10-05T16:00:00Z"],
    ),
    (
        "45 1 * * *",
        LORD_HOWE,
        "auto",
        "auto",
        "2024-04-05T00:00:00Z",
        ["2024-04-05T14:45:00Z", "2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"],
    ),
    (
        "45 1 * * *",
        LORD_HOWE,
        "auto",
        "both",
        "2024-04-05T00:00:00Z",
        [
            "2024-04-05T14:45:00Z",
            "2024-04-06T14:45:00Z",
            "2024-04-06T15:15:00Z",
            "2024-04-07T15:15:00Z",
        ],
    ),
    (
        "0 * * * *",
        LORD_HOWE,
        "auto",
        "auto",
        "2024-04-06T12:30:00Z",
        [
            "2024-04-06T13:00:00Z",
            "2024-04-06T14:00:00Z",
            "2024-04-06T15:30:00Z",
            "2024-04-06T16:30:00Z",
        ],
    ),
    (
        "*/30 * * * *",
        LORD_HOWE,
        "auto",
        "auto",
        "2024-04-06T13:50:00Z",
        [
            "2024-04-06T14:00:00Z",
            "2024-04-06T14:30:00Z",
            "2024-04-06T15:00:00Z",
            "2024-04-06T15:30:00Z",
        ],
    ),
    (
        "*/30 * * * *",
        LORD_HOWE,
        "auto",
        "first",
        "2024-04-06T13:50:00Z",
        ["2024-04-06T14:00:00Z", "2024-04-06T14:30:00Z", "2024-04-06T15:30:00Z"],
    ),
    # --- America/Santiago (transitions at midnight) ---
    (
        "@daily",
        SANTIAGO,
        "auto",
        "auto",
        "2024-09-06T12:00:00Z",
        ["2024-09-07T04:00:00Z", "2024-09-08T04:00:00Z", "2024-09-09T03:00:00Z"],
    ),
    (
        "@daily",
        SANTIAGO,
        "skip",
        "auto",
        "2024-09-06T12:00:00Z",
        ["2024-09-07T04:00:00Z", "2024-09-09T03:00:00Z"],
    ),
    (
        "0 0 * * SUN",
        SANTIAGO,
        "auto",
        "auto",
        "2024-09-02T00:00:00Z",
        ["2024-09-08T04:00:00Z", "2024-09-15T03:00:00Z"],
    ),
    (
        "0 * * * *",
        SANTIAGO,
        "auto",
        "auto",
        "2024-09-08T02:30:00Z",
        ["2024-09-08T03:00:00Z", "2024-09-08T04:00:00Z", "2024-09-08T05:00:00Z"],
    ),
    (
        "@daily",
        SANTIAGO,
        "auto",
        "auto",
        "2024-04-05T12:00:00Z",
        ["2024-04-06T03:00:00Z", "2024-04-07T04:00:00Z", "2024-04-08T04:00:00Z"],
    ),
    (
        "30 23 * * *",
        SANTIAGO,
        "auto",
        "auto",
        "2024-04-05T12:00:00Z",
        ["2024-04-06T02:30:00Z", "2024-04-07T02:30:00Z", "2024-04-08T03:30:00Z"],
    ),
    (
        "30 23 * * *",
        SANTIAGO,
        "auto",
        "both",
        "2024-04-05T12:00:00Z",
        [
            "2024-04-06T02:30:00Z",
            "2024-04-07T02:30:00Z",
            "2024-04-07T03:30:00Z",
            "2024-04-08T03:30:00Z",
        ],
    ),
    (
        "0 * * * *",
        SANTIAGO,
        "auto",
        "auto",
        "2024-04-07T01:30:00Z",
        ["2024-04-07T02:00:00Z", "2024-04-07T03:00:00Z", "2024-04-07T04:00:00Z"],
    ),
    # --- America/Havana (midnight missing, midnight twice) ---
    (
        "@daily",
        HAVANA,
        "auto",
        "auto",
        "2024-03-08T12:00:00Z",
        ["2024-03-09T05:00:00Z", "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"],
    ),
    (
        "*/20 0 * * *",
        HAVANA,
        "auto",
        "auto",
        "2024-03-09T00:00:00Z",
        [
            "2024-03-09T05:00:00Z",
            "2024-03-09T05:20:00Z",
            "2024-03-09T05:40:00Z",
            "2024-03-11T04:00:00Z",
        ],
    ),
    (
        "@midnight",
        HAVANA,
        "auto",
        "auto",
        "2024-11-01T12:00:00Z",
        ["2024-11-02T04:00:00Z", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"],
    ),
    (
        "@midnight",
        HAVANA,
        "auto",
        "both",
        "2024-11-01T12:00:00Z",
        [
            "2024-11-02T04:00:00Z",
            "2024-11-03T04:00:00Z",
            "2024-11-03T05:00:00Z",
            "2024-11-04T05:00:00Z",
        ],
    ),
    (
        "*/20 0 * * *",
        HAVANA,
        "auto",
        "auto",
        "2024-11-03T00:00:00Z",
        [
            "2024-11-03T04:00:00Z",
            "2024-11-03T04:20:00Z",
            "2024-11-03T04:40:00Z",
            "2024-11-03T05:00:00Z",
            "2024-11-03T05:20:00Z",
            "2024-11-03T05:40:00Z",
            "2024-11-04T05:00:00Z",
        ],
    ),
    # --- Asia/Beirut (midnight transitions) ---
    (
        "@daily",
        BEIRUT,
        "auto",
        "auto",
        "2024-03-29T12:00:00Z",
        ["2024-03-29T22:00:00Z", "2024-03-30T22:00:00Z", "2024-03-31T21:00:00Z"],
    ),
    (
        "30 0 * * *",
        BEIRUT,
        "skip",
        "auto",
        "2024-03-29T12:00:00Z",
        ["2024-03-29T22:30:00Z", "2024-03-31T21:30:00Z"],
    ),
    (
        "@daily",
        BEIRUT,
        "auto",
        "auto",
        "2024-10-25T12:00:00Z",
        ["2024-10-25T21:00:00Z", "2024-10-26T22:00:00Z", "2024-10-27T22:00:00Z"],
    ),
    (
        "30 23 * * *",
        BEIRUT,
        "auto",
        "auto",
        "2024-10-25T12:00:00Z",
        ["2024-10-25T20:30:00Z", "2024-10-26T20:30:00Z", "2024-10-27T21:30:00Z"],
    ),
    (
        "30 23 * * *",
        BEIRUT,
        "auto",
        "both",
        "2024-10-25T12:00:00Z",
        [
            "2024-10-25T20:30:00Z",
            "2024-10-26T20:30:00Z",
            "2024-10-26T21:30:00Z",
            "2024-10-27T21:30:00Z",
        ],
    ),
    (
        "0 * * * *",
        BEIRUT,
        "auto",
        "auto",
        "2024-10-26T19:30:00Z",
        ["2024-10-26T20:00:00Z", "2024-10-26T21:00:00Z", "2024-10-26T22:00:00Z"],
    ),
    # --- Pacific/Apia 2011: a 24-hour gap ---
    (
        "0 12 * * *",
        "Pacific/Apia",
        "auto",
        "auto",
        "2011-12-29T12:00:00Z",
        ["2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"],
    ),
    (
        "0 12 * * *",
        "Pacific/Apia",
        "skip",
        "auto",
        "2011-12-29T12:00:00Z",
        ["2011-12-29T22:00:00Z", "2011-12-30T22:00:00Z"],
    ),
]


@pytest.mark.parametrize(
    ("expression", "zone", "gap", "repeat", "after", "expected"),
    VECTORS,
    ids=[f"{v[1]}|{v[0]}|{v[2]}|{v[3]}|{v[4][:10]}" for v in VECTORS],
)
def test_vector(
    expression: str, zone: str, gap: str, repeat: str, after: str, expected: list[str]
) -> None:
    schedule = parse_cron(expression, zone, gap, repeat)  # type: ignore[arg-type]
    assert schedule.next_n(z(after), len(expected)) == [z(text) for text in expected]


def test_gap_fire_is_strictly_after() -> None:
    schedule = parse_cron("30 2 * * *", NY)
    assert schedule.next_after(z("2024-03-10T07:00:00Z") - 1) == z("2024-03-10T07:00:00Z")
    assert schedule.next_after(z("2024-03-10T07:00:00Z")) == z("2024-03-11T06:30:00Z")


def test_after_inside_second_pass_of_repeated_hour() -> None:
    first = parse_cron("30 1 * * *", NY)
    assert first.next_after(z("2024-11-03T06:10:00Z")) == z("2024-11-04T06:30:00Z")
    both = parse_cron("30 1 * * *", NY, "auto", "both")
    assert both.next_after(z("2024-11-03T06:10:00Z")) == z("2024-11-03T06:30:00Z")
    assert both.next_after(z("2024-11-03T05:30:00Z")) == z("2024-11-03T06:30:00Z")


def test_same_local_time_in_utc_is_unaffected() -> None:
    schedule = parse_cron("30 2 * * *", "UTC")
    assert schedule.next_n(z("2024-03-10T00:00:00Z"), 2) == [
        z("2024-03-10T02:30:00Z"),
        z("2024-03-11T02:30:00Z"),
    ]


def test_fixed_offset_zone_sign() -> None:
    # POSIX-style names: Etc/GMT+5 is UTC-5.
    schedule = parse_cron("0 12 * * *", "Etc/GMT+5")
    assert schedule.next_after(z("2024-01-01T00:00:00Z")) == z("2024-01-01T17:00:00Z")
    schedule = parse_cron("0 12 * * *", "Asia/Kolkata")
    assert schedule.next_after(z("2024-01-01T00:00:00Z")) == z("2024-01-01T06:30:00Z")

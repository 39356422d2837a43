"""A job's plan: the emission lead of sparse schedules, and its spacing computed once per
schedule shared by many jobs."""

from __future__ import annotations

from datetime import date

import pytest

from schedulerstream.scheduler.plan import lead_for, spacing_us
from schedulerstream.timing import Schedule
from schedulerstream.timing.at import AtSchedule
from schedulerstream.timing.combine import ExcludedSchedule, UnionSchedule
from schedulerstream.timing.cron_next import CronSchedule
from schedulerstream.timing.every import EverySchedule
from schedulerstream.timing.spec import BoundedSchedule
from schedulerstream.timing.zones import ZoneTimeline
from tests.scheduler.harness import Harness, definition, us

MINUTE = 60_000_000
HOUR = 60 * MINUTE
REFERENCE = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z, the plan's fixed reference


class CountingCron(CronSchedule):
    """A CronSchedule that counts the instants asked of it (equal to a plain one)."""

    __slots__ = ()
    asked = 0

    def next_n(self, after_us: int, n: int) -> list[int]:
        CountingCron.asked += 1
        return super().next_n(after_us, n)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        (CronSchedule("*/5 * * * *"), 5 * MINUTE),
        (CronSchedule("0 9,17 * * *", "Europe/Paris"), 8 * HOUR),
        (UnionSchedule([CronSchedule("0 * * * *"), CronSchedule("30 * * * *")]), 30 * MINUTE),
        (ExcludedSchedule(CronSchedule("0 0 * * *"), [date(2024, 1, 2)], "UTC"), 24 * HOUR),
        (BoundedSchedule(CronSchedule("0 * * * *"), None, REFERENCE + HOUR + 1), None),
        (BoundedSchedule(CronSchedule("0 * * * *"), None, REFERENCE + 2 * HOUR + 1), HOUR),
        (EverySchedule(90), 90_000_000),
        (AtSchedule(REFERENCE + HOUR), None),
    ],
)
def test_spacing_is_the_shortest_gap_after_the_reference(
    schedule: Schedule, expected: int | None
) -> None:
    assert spacing_us(schedule) == expected
    assert spacing_us(schedule) == expected  # and again, from the memo where there is one


def test_jobs_sharing_a_cron_schedule_compute_its_spacing_once() -> None:
    first = CountingCron("7 4 9 2 *", "Pacific/Chatham")
    twin = CountingCron("7 4 9 2 *", "Pacific/Chatham")  # another job's equal schedule
    assert first is not twin and first == twin
    answers = {spacing_us(first), spacing_us(twin), spacing_us(first)}
    assert answers == {366 * 24 * HOUR} or answers == {365 * 24 * HOUR}
    assert CountingCron.asked == 1


def test_a_sparse_schedule_gets_the_burst_lead_and_a_dense_one_none() -> None:
    assert lead_for(CronSchedule("0 * * * *"), 60_000_000, 10_000_000) == 10_000_000
    assert lead_for(CronSchedule("* * * * * *"), 60_000_000, 10_000_000) == 0
    assert lead_for(AtSchedule(REFERENCE), 60_000_000, 10_000_000) == 10_000_000


def test_jobs_excluded_until_9999_in_a_dst_zone_are_planned_in_a_few_lookups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The reviewer's case: the first such job held the processor thread 12.5 s (its zone's
    # timeline built out to 9999, ~47,000 segment lookups), each next one 0.15-0.19 s.
    lookups: list[int] = []
    chunk = ZoneTimeline._chunk

    def counted(self: ZoneTimeline, index: int) -> object:
        lookups.append(index)
        return chunk(self, index)

    monkeypatch.setattr(ZoneTimeline, "_chunk", counted)
    h = Harness(lookahead_s=3.5, burst_lead_s=1.0)
    h.now = us("2026-12-07T10:00:00.2Z")
    for i in range(20):
        schedule = {
            "cron": f"{i} * * * * *",
            "timezone": "America/New_York",
            "exclude": [{"from": "2026-12-01", "to": "9999-12-30"}],
        }
        h.put(definition(1, job_id=f"j{i}", schedule=schedule), key=f"acme/j{i}".encode())
    h.tick_until(h.now + 5_000_000)
    assert h.out.runs() == []
    assert len(lookups) <= 20 * 20

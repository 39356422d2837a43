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

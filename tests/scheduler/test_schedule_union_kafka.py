"""Several cron expressions and excluded dates, end to end: a real scheduler processor on the
real broker, its clock moved by hand across ten days in two-hour steps."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.codec import default_codec
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.runtime import Processor, TaskContext
from schedulerstream.scheduler.topology import SchedulerTopology
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import drive
from tests.support.runs import first_event, read_events, read_runs

pytestmark = pytest.mark.kafka
MICROS = 1_000_000
HOUR = 3600 * MICROS
PARIS = ZoneInfo("Europe/Paris")


class WatchedScheduler(SchedulerTopology):
    """The scheduler topology, noting the clock reading of each partition's latest tick."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.ticked: dict[int, int] = {}

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        super().punctuate(ctx, now_us)
        self.ticked[ctx.partition] = now_us


def expected_instants(excluded: date, after_us: int, until_us: int) -> list[int]:
    """09:00 Monday to Friday and 12:00 on Saturday in Paris, never on ``excluded``."""
    found = []
    day = datetime.fromtimestamp(after_us / MICROS, PARIS).date()
    while True:
        if day != excluded and day.weekday() < 6:
            hour = 12 if day.weekday() == 5 else 9
            local = datetime(day.year, day.month, day.day, hour, tzinfo=PARIS)
            instant = int(local.timestamp()) * MICROS
            if instant > until_us:
                return found
            if instant > after_us:
                found.append(instant)
        day += timedelta(days=1)


def test_two_expressions_and_an_excluded_date_fire_exactly_the_union_minus_the_date(
    topo: Settings,
) -> None:
    settings = topo.model_copy(update={"misfire_grace_ms": 3 * 3600 * 1000})
    start_us = time.time_ns() // 1000
    today = datetime.fromtimestamp(start_us / MICROS, PARIS).date()
    # A Wednesday two to eight days ahead: the weekday expression would fire on it.
    excluded = next(
        today + timedelta(days=k) for k in range(2, 9) if (today + timedelta(days=k)).weekday() == 2
    )
    job = JobDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "weekdays-and-saturdays",
            "schedule": {
                "cron": ["0 9 * * MON-FRI", "0 12 * * SAT"],
                "timezone": "Europe/Paris",
                "exclude": [excluded.isoformat()],
            },
            "target": {"type": "kafka", "topic": "out"},
        }
    )
    clock = ManualClock(start_us)
    topology = WatchedScheduler(settings)
    processor = Processor(settings, topology, clock=clock)
    processor.start()
    try:
        drive([processor], lambda: len(processor.running_partitions()) == settings.partitions)
        Publisher(settings).put_jobs([job])
        drive([processor], lambda: processor.metrics["records_processed"] >= 1)
        written = first_event(settings, "schedules")
        written_us = written.timestamp()[1] * 1000  # the job counts as fired through this

        now_us = start_us
        end_us = start_us + 10 * 24 * HOUR
        while now_us < end_us:
            now_us = min(end_us, now_us + 2 * HOUR)
            clock.set_us(now_us)

            def caught_up(at: int = now_us) -> bool:
                ticked = len(topology.ticked) == settings.partitions
                return ticked and min(topology.ticked.values()) >= at and not processor.commit()

            drive([processor], caught_up)
    finally:
        processor.close()

    seen = read_runs(settings)
    assert seen.duplicates() == {}
    fired = [r["scheduled_at_us"] for r in seen.triggered]
    expected = expected_instants(excluded, written_us, end_us)
    assert sorted(fired) == expected
    assert len(expected) >= 6  # nine or ten days of fires, minus one
    saturday_noon = [t for t in fired if datetime.fromtimestamp(t / MICROS, PARIS).hour == 12]
    assert saturday_noon, "the Saturday expression fired"
    local_days = {datetime.fromtimestamp(t / MICROS, PARIS).date() for t in fired}
    assert excluded not in local_days
    attempts: list[Any] = read_events(settings, "attempts", idle_timeout=1.0)
    kinds = [_kind(message.value()) for message in attempts]
    assert "missed" not in kinds  # an excluded instant is neither run nor missed


def _kind(value: bytes) -> str:
    return str(default_codec().decode(value)[1]["kind"])

"""Cron next-instant throughput against croniter, measured in the same run.

Both engines answer the same (expression, zone, after) cases, a mix of typical expressions in UTC
and America/New_York with distinct ``after`` instants spread over years (DST transitions
included), so nothing is answered from a result cache:

- ``croniter_next_per_s``: ``croniter(expr, start).get_next(datetime)``, constructed each time;
- ``cron_next_per_s``: ``parse_cron(expr, tz).next_after(after_us)``: the shared schedule is
  looked up (as the scheduler holds it per job) and the next instant computed cold;
- ``cron_construct_next_per_s``: a new ``CronSchedule`` per call (field parsing and zone data
  stay memoized process-wide), then ``next_after``;
- ``cron_cached_next_per_s``: ``NextInstantCache`` hits (many jobs, one expression, one instant).

The last stdout line is JSON; ``--quick`` runs a short measurement.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from croniter import croniter

from schedulerstream.timing import CronSchedule, NextInstantCache, get_zone, parse_cron

EXPRESSIONS = [
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "15 10 1 * *",
    "0 0 * * 0",
    "*/15 9-17 * * MON-FRI",
    "0 0 1 1 *",
    "0 */6 * * *",
    "45 23 * * *",
]
ZONES = ["UTC", "America/New_York"]
_START_US = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
_STEP_US = 7_919_123_457  # about 2.2 hours, so the cases cover ~5 years


def cases(count: int) -> list[tuple[str, str, int, datetime]]:
    """Distinct (expression, zone, after_us, after as an aware datetime in the zone)."""
    found = []
    for i in range(count):
        expression = EXPRESSIONS[i % len(EXPRESSIONS)]
        zone = ZONES[(i // len(EXPRESSIONS)) % len(ZONES)]
        after_us = _START_US + i * _STEP_US
        after = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=after_us)
        found.append((expression, zone, after_us, after.astimezone(get_zone(zone))))
    return found


def _rate(run: Callable[[int], None], batch: int, seconds: float) -> float:
    """Operations per second of ``run(batch)`` repeated for about ``seconds``."""
    done = 0
    start = time.perf_counter()
    while True:
        run(batch)
        done += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def measure(seconds: float) -> dict[str, float]:
    """Measure every rate for about ``seconds`` in total; returns the rates and the ratio."""
    sample = cases(20_000)
    for expression in EXPRESSIONS:
        for zone in ZONES:
            parse_cron(expression, zone).next_after(_START_US)
    position = 0

    def ours(batch: int) -> None:
        nonlocal position
        for _ in range(batch):
            expression, zone, after_us, _ = sample[position]
            parse_cron(expression, zone).next_after(after_us)
            position = (position + 1) % len(sample)

    def construct(batch: int) -> None:
        nonlocal position
        for _ in range(batch):
            expression, zone, after_us, _ = sample[position]
            CronSchedule(expression, zone).next_after(after_us)
            position = (position + 1) % len(sample)

    def theirs(batch: int) -> None:
        nonlocal position
        for _ in range(batch):
            expression, _, _, after = sample[position]
            croniter(expression, after).get_next(datetime)
            position = (position + 1) % len(sample)

    cache = NextInstantCache()
    hourly = parse_cron("0 * * * *", "America/New_York")

    def cached(batch: int) -> None:
        for _ in range(batch):
            cache.next_after(hourly, _START_US)

    share = seconds / 4
    croniter_rate = _rate(theirs, 200, share)
    position = 0
    cron_rate = _rate(ours, 1000, share)
    position = 0
    construct_rate = _rate(construct, 500, share)
    cached_rate = _rate(cached, 5000, share)
    agree = sum(
        parse_cron(e, z).next_after(a)
        == int(croniter(e, d).get_next(datetime).timestamp()) * 1_000_000
        for e, z, a, d in sample[:2000]
    )
    return {
        "cron_next_per_s": round(cron_rate),
        "croniter_next_per_s": round(croniter_rate),
        "cron_construct_next_per_s": round(construct_rate),
        "cron_cached_next_per_s": round(cached_rate),
        "agreement_with_croniter": round(agree / 2000, 4),
        "cron_vs_croniter": round(cron_rate / croniter_rate, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about 2 s)")
    parser.add_argument("--seconds", type=float, default=12.0, help="total measuring time")
    args = parser.parse_args()
    result = measure(2.0 if args.quick else args.seconds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

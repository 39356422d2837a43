"""The scheduler logic's counters, read by attribute by ``observability/collectors.py``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Counters:
    runs_revoked: int = 0
    instants_missed: int = 0
    stale_versions: int = 0
    duplicate_requests: int = 0
    paused_by_command: int = 0
    pauses_ignored: int = 0
    quarantined: int = 0  # jobs paused because a record of theirs could not be written
    failed_ticks: int = 0  # ticks of one job that raised (the job is quarantined)
    backfill_rate_waits: int = 0  # ticks whose backfill chunks waited for the backfill rate
    by_trigger: dict[str, int] = field(default_factory=dict)

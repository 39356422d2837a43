"""Per-schedule DST policy settings and how ``auto`` resolves (DESIGN.md §4)."""

from __future__ import annotations

from typing import Literal

from schedulerstream.contracts.policies import DST_GAP_VALUES, DST_REPEAT_VALUES
from schedulerstream.errors import ValidationError

ResolvedGap = Literal["fire_after", "skip"]
ResolvedRepeat = Literal["first", "both"]


def resolve_gap(value: str, is_fixed_time: bool) -> ResolvedGap:
    """``auto`` is Vixie cron's rule: fixed-time schedules fire after the jump, others skip."""
    if value == "auto":
        return "fire_after" if is_fixed_time else "skip"
    if value == "fire_after":
        return "fire_after"
    if value == "skip":
        return "skip"
    raise ValidationError("dst_gap", f"{value!r} is not one of {', '.join(DST_GAP_VALUES)}")


def resolve_repeat(value: str, is_fixed_time: bool) -> ResolvedRepeat:
    """``auto`` is Vixie cron's rule: fixed-time schedules fire once, others in both passes."""
    if value == "auto":
        return "first" if is_fixed_time else "both"
    if value == "first":
        return "first"
    if value == "both":
        return "both"
    raise ValidationError("dst_repeat", f"{value!r} is not one of {', '.join(DST_REPEAT_VALUES)}")

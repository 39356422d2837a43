"""A job's policy values, spelled as the API's JSON, the job files and the Avro records spell
them (strings: the schemas in ``schemas/`` keep them as ``string`` fields)."""

from __future__ import annotations

from typing import Literal, get_args

MisfirePolicy = Literal["skip", "fire_once", "catch_up"]
"""Instants missed while nothing ran: none, the latest one, or all within the window."""

OverlapPolicy = Literal["allow", "forbid", "replace", "buffer_one"]
"""A run due while the job's previous one is still in flight."""

DeliveryMode = Literal["at_least_once", "at_most_once"]
"""Whether an attempt whose outcome is unknown is retried (at least once) or not."""

DstGap = Literal["auto", "fire_after", "skip"]
"""What a local time skipped by a forward jump does: fire at the jump, or not at all."""

DstRepeat = Literal["auto", "first", "both"]
"""What a local time repeated by a backward jump does: fire at its first occurrence, or at both."""

MISFIRE_POLICIES: frozenset[str] = frozenset(get_args(MisfirePolicy))
OVERLAP_POLICIES: frozenset[str] = frozenset(get_args(OverlapPolicy))
DELIVERY_MODES: frozenset[str] = frozenset(get_args(DeliveryMode))
DST_GAP_VALUES: tuple[str, ...] = get_args(DstGap)
DST_REPEAT_VALUES: tuple[str, ...] = get_args(DstRepeat)

"""Tenant and job ids, job keys and deterministic run ids (DESIGN.md §2)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

from schedulerstream.errors import ValidationError

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
INSTANT_FORMAT = "%Y%m%dT%H%M%SZ"


def check_id(field: str, value: str) -> str:
    """Return ``value`` if it is a valid tenant or job id, else raise naming ``field``."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise ValidationError(field, f"{value!r} must match [a-z0-9][a-z0-9._-]{{0,62}}")
    return value


def check_request_id(value: str) -> str:
    if not _REQUEST_ID_PATTERN.fullmatch(value):  # ``$`` alone lets a final newline in
        raise ValidationError("request_id", f"{value!r} must match [A-Za-z0-9._:-]{{1,128}}")
    return value


def job_key(tenant: str, job_id: str) -> str:
    return f"{check_id('tenant', tenant)}/{check_id('job_id', job_id)}"


def split_job_key(key: str) -> tuple[str, str]:
    """Split and validate ``tenant/job_id``."""
    tenant, sep, job_id = key.partition("/")
    if not sep:
        raise ValidationError("key", f"{key!r} is not of the form tenant/job_id")
    return check_id("tenant", tenant), check_id("job_id", job_id)


@lru_cache(maxsize=8192)
def format_instant(instant_us: int) -> str:
    """``%Y%m%dT%H%M%SZ`` of an instant (cached: a burst shares one instant)."""
    return datetime.fromtimestamp(instant_us / 1_000_000, tz=UTC).strftime(INSTANT_FORMAT)


def scheduled_run_id(key: str, instant_us: int) -> str:
    """Run id of a scheduled, catch-up or (rerun=false) backfill run."""
    return f"{key}@{format_instant(instant_us)}"


def manual_run_id(key: str, request_id: str) -> str:
    return f"{key}@manual-{check_request_id(request_id)}"


def rerun_run_id(key: str, instant_us: int, request_id: str) -> str:
    return f"{key}@{format_instant(instant_us)}~{check_request_id(request_id)}"


def job_key_of_run(run_id: str) -> str:
    """The job key a run id belongs to."""
    key, sep, _ = run_id.partition("@")
    if not sep:
        raise ValidationError("run_id", f"{run_id!r} has no '@'")
    split_job_key(key)
    return key

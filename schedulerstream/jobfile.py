"""Read job definitions from a file: one JSON object, a JSON array, or JSON lines.

Every item is validated before anything is produced; errors name the line and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Protocol

from pydantic import ValidationError

from schedulerstream.errors import ValidationError as SchedulerValidationError
from schedulerstream.model import JobDefinition, field_errors

PROGRESS_STEP = 1000  # items between two progress reports
_BLANK = re.compile(r"[ \t\r\n]*")
_BLANK_OR_COMMA = re.compile(r"[ \t\r\n,]*")


class Progress(Protocol):
    """Told how far a long step is: ``done`` of ``total`` items of the ``stage``."""

    def __call__(self, stage: str, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class JobFileError:
    """One problem of one item: its line, the field, the message and the job it names."""

    line: int
    field: str
    message: str
    job: str | None = None  # "tenant/job_id" (or the job_id) when the item gives them

    def __str__(self) -> str:
        named = "" if self.job is None else f" (job {self.job})"
        return f"line {self.line}: {self.field}: {self.message}{named}"


def _job_named(value: object) -> str | None:
    """The job an item names, as far as it names one."""
    if not isinstance(value, dict):
        return None
    tenant, job_id = value.get("tenant"), value.get("job_id")
    if not isinstance(job_id, str):
        return None
    return f"{tenant}/{job_id}" if isinstance(tenant, str) else job_id


def _skip(pattern: re.Pattern[str], text: str, index: int) -> int:
    found = pattern.match(text, index)
    return index if found is None else found.end()


def _items(text: str) -> list[tuple[int, object]]:
    """(line, value) of each top-level item; lines are counted once over the whole text."""
    decoder = json.JSONDecoder()
    index = _skip(_BLANK, text, 0)
    items: list[tuple[int, object]] = []
    line, counted = 1, 0
    in_array = text.startswith("[", index)
    skip = _BLANK_OR_COMMA if in_array else _BLANK
    if in_array:
        index += 1
    while True:
        index = _skip(skip, text, index)
        if index >= len(text):
            if in_array:
                raise json.JSONDecodeError("unterminated array", text, index)
            return items
        if in_array and text[index] == "]":
            return items
        value, end = decoder.raw_decode(text, index)
        line += text.count("\n", counted, index)
        counted = index
        items.append((line, value))
        index = end


def parse_job_file(
    text: str, progress: Progress | None = None
) -> tuple[list[JobDefinition], list[JobFileError]]:
    """All jobs in ``text`` and every error found (both lists complete); ``progress`` hears
    of the ``validating`` stage."""
    try:
        items = _items(text)
    except json.JSONDecodeError as exc:
        return [], [JobFileError(exc.lineno, "json", exc.msg)]
    if not items:
        return [], [JobFileError(1, "json", "no job definitions found")]
    jobs: list[JobDefinition] = []
    errors: list[JobFileError] = []
    seen: dict[str, int] = {}
    for done, (line, value) in enumerate(items, 1):
        if progress is not None and (done % PROGRESS_STEP == 0 or done == len(items)):
            progress("validating", done, len(items))
        try:
            job = JobDefinition.model_validate(value)
        except ValidationError as exc:
            named = _job_named(value)
            errors.extend(JobFileError(line, f, m, named) for f, m in field_errors(exc))
            continue
        except SchedulerValidationError as exc:
            errors.append(JobFileError(line, exc.field, exc.message, _job_named(value)))
            continue
        key = job.key
        if key in seen:
            errors.append(JobFileError(line, "job_id", f"also defined on line {seen[key]}", key))
            continue
        seen[key] = line
        jobs.append(job)
    return jobs, errors

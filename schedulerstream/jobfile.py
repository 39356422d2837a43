"""Read job definitions from a file: one JSON object, a JSON array, or JSON lines.

Every item is validated before anything is produced; errors name the line and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from schedulerstream.errors import ValidationError as SchedulerValidationError
from schedulerstream.model import JobDefinition, field_errors

_WHITESPACE = " \t\r\n"


@dataclass(frozen=True)
class JobFileError:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


def _items(text: str) -> list[tuple[int, object]]:
    """(line, value) of each top-level item."""
    decoder = json.JSONDecoder()
    stripped = text.lstrip(_WHITESPACE)
    start = len(text) - len(stripped)
    items: list[tuple[int, object]] = []
    if stripped.startswith("["):
        index = start + 1
        while True:
            while index < len(text) and text[index] in _WHITESPACE + ",":
                index += 1
            if index >= len(text):
                raise json.JSONDecodeError("unterminated array", text, index)
            if text[index] == "]":
                return items
            value, end = decoder.raw_decode(text, index)
            items.append((text.count("\n", 0, index) + 1, value))
            index = end
    index = start
    while index < len(text):
        value, end = decoder.raw_decode(text, index)
        items.append((text.count("\n", 0, index) + 1, value))
        index = end
        while index < len(text) and text[index] in _WHITESPACE:
            index += 1
    return items


def parse_job_file(text: str) -> tuple[list[JobDefinition], list[JobFileError]]:
    """All jobs in ``text`` and every error found (both lists complete)."""
    try:
        items = _items(text)
    except json.JSONDecodeError as exc:
        return [], [JobFileError(exc.lineno, "json", exc.msg)]
    if not items:
        return [], [JobFileError(1, "json", "no job definitions found")]
    jobs: list[JobDefinition] = []
    errors: list[JobFileError] = []
    seen: dict[str, int] = {}
    for line, value in items:
        try:
            job = JobDefinition.model_validate(value)
        except ValidationError as exc:
            errors.extend(JobFileError(line, f, m) for f, m in field_errors(exc))
            continue
        except SchedulerValidationError as exc:
            errors.append(JobFileError(line, exc.field, exc.message))
            continue
        if job.key in seen:
            errors.append(
                JobFileError(line, "job_id", f"{job.key} is also defined on line {seen[job.key]}")
            )
            continue
        seen[job.key] = line
        jobs.append(job)
    return jobs, errors

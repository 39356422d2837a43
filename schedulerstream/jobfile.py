"""Read job definitions from a file: one JSON object, a JSON array, or JSON lines.

Every item is validated before anything is produced; errors name the line and the field.
JSON lines are validated from each line's text (pydantic-core parses and validates in one
pass); any other layout, or a line that is not JSON, is read item by item with ``json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
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


def _json_lines(text: str) -> list[tuple[int, str]] | None:
    """(line, text) of each non-blank line when ``text`` looks like JSON lines (every such
    line an object on its own), else None."""
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if len(lines) < 2 or not all(line.lstrip()[0] == "{" and line.rstrip()[-1] == "}"
                                 for _, line in lines):  # fmt: skip
        return None
    return lines


def _validated(
    items: list[tuple[int, str]], progress: Progress | None
) -> tuple[list[JobDefinition], list[JobFileError]] | None:
    """JSON lines validated from their text (pydantic parses and validates in one pass),
    or None when a line is not one JSON value after all."""
    checked: list[tuple[int, JobDefinition | None, object]] = []
    for done, (line, raw) in enumerate(items, 1):
        if progress is not None and (done % PROGRESS_STEP == 0 or done == len(items)):
            progress("validating", done, len(items))
        try:
            checked.append((line, JobDefinition.model_validate_json(raw), None))
        except ValidationError as exc:
            if any(error["type"] == "json_invalid" for error in exc.errors()):
                return None  # e.g. an object over several lines: the general reader
            checked.append((line, None, exc))
        except SchedulerValidationError as exc:
            checked.append((line, None, exc))
    return _collect(
        (line, json.loads(raw) if failed else None, job, failed)
        for (line, job, failed), (_, raw) in zip(checked, items, strict=True)
    )


def parse_job_file(
    text: str, progress: Progress | None = None
) -> tuple[list[JobDefinition], list[JobFileError]]:
    """All jobs in ``text`` and every error found (both lists complete); ``progress`` hears
    of the ``validating`` stage."""
    lines = _json_lines(text)
    if lines is not None:
        found = _validated(lines, progress)
        if found is not None:
            return found
    try:
        items = _items(text)
    except json.JSONDecodeError as exc:
        return [], [JobFileError(exc.lineno, "json", exc.msg)]
    if not items:
        return [], [JobFileError(1, "json", "no job definitions found")]
    checked: list[tuple[int, object, JobDefinition | None, object]] = []
    for done, (line, value) in enumerate(items, 1):
        if progress is not None and (done % PROGRESS_STEP == 0 or done == len(items)):
            progress("validating", done, len(items))
        try:
            checked.append((line, value, JobDefinition.model_validate(value), None))
        except (ValidationError, SchedulerValidationError) as exc:
            checked.append((line, value, None, exc))
    return _collect(checked)


def _collect(
    checked: Iterable[tuple[int, object, JobDefinition | None, object]],
) -> tuple[list[JobDefinition], list[JobFileError]]:
    """The jobs and the errors of validated items: (line, value, job or None, its error);
    a job defined twice is an error on its second line."""
    jobs: list[JobDefinition] = []
    errors: list[JobFileError] = []
    seen: dict[str, int] = {}
    for line, value, job, failed in checked:
        if isinstance(failed, ValidationError):
            named = _job_named(value)
            errors.extend(JobFileError(line, f, m, named) for f, m in field_errors(failed))
            continue
        if isinstance(failed, SchedulerValidationError):
            errors.append(JobFileError(line, failed.field, failed.message, _job_named(value)))
            continue
        assert job is not None
        key = job.key
        if key in seen:
            errors.append(JobFileError(line, "job_id", f"also defined on line {seen[key]}", key))
            continue
        seen[key] = line
        jobs.append(job)
    return jobs, errors

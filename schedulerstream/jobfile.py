"""Read job definitions from a file: one JSON object, a JSON array, or JSON lines.

Every item is validated before anything is produced; errors name the line and the field.
JSON lines are validated from each line's text (pydantic-core parses and validates in one
pass), and each broken line is named; any other layout is read item by item with ``json``
(the first JSON error ends the reading).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
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


def json_lines(text: str) -> list[tuple[int, str]] | None:
    """(line, text) of each non-blank line when ``text`` is JSON lines (every such line
    starts an object and ends it), else None. Such lines are independent: a value that went
    on over a line break would need a line that starts with something else."""
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if len(lines) < 2 or not all(line.lstrip()[0] == "{" and line.rstrip()[-1] == "}"
                                 for _, line in lines):  # fmt: skip
        return None
    return lines


# (line, the job, []) or (line, None, what is wrong with the item)
Checked = tuple[int, JobDefinition | None, list[JobFileError]]


def _check_value(line: int, value: object) -> Checked:
    try:
        return line, JobDefinition.model_validate(value), []
    except ValidationError as exc:
        named = _job_named(value)
        return line, None, [JobFileError(line, f, m, named) for f, m in field_errors(exc)]
    except SchedulerValidationError as exc:
        return line, None, [JobFileError(line, exc.field, exc.message, _job_named(value))]


def check_line(line: int, raw: str) -> Checked:
    """One JSON line, parsed and validated by pydantic in one pass; the standard reader only
    for a line that fails (for its message, and for what only it reads, such as NaN)."""
    try:
        return line, JobDefinition.model_validate_json(raw), []
    except (ValidationError, SchedulerValidationError):
        pass
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return line, None, [JobFileError(line, "json", exc.msg)]
    return _check_value(line, value)


_UNREAD: list[tuple[int, str]] = []


def checked_items(
    text: str, progress: Progress | None, lines: list[tuple[int, str]] | None = _UNREAD
) -> Iterator[Checked]:
    """Each item of ``text``, validated, in order; no check across items (``check_job_file``
    adds the one for a job defined twice). ``lines``: ``json_lines(text)``, when the caller
    has it already."""
    if lines is _UNREAD:
        lines = json_lines(text)
    if lines is not None:
        for done, (line, raw) in enumerate(lines, 1):
            if progress is not None and (done % PROGRESS_STEP == 0 or done == len(lines)):
                progress("validating", done, len(lines))
            yield check_line(line, raw)
        return
    try:
        items = _items(text)
    except json.JSONDecodeError as exc:
        yield exc.lineno, None, [JobFileError(exc.lineno, "json", exc.msg)]
        return
    if not items:
        yield 1, None, [JobFileError(1, "json", "no job definitions found")]
    for done, (line, value) in enumerate(items, 1):
        if progress is not None and (done % PROGRESS_STEP == 0 or done == len(items)):
            progress("validating", done, len(items))
        yield _check_value(line, value)


def check_job_file(text: str, progress: Progress | None = None) -> Iterator[Checked]:
    """Each item of ``text``, validated, in order (a job defined twice is an error on its
    second line); ``progress`` hears of the ``validating`` stage. A caller that consumes the
    jobs as they come keeps none of them alive."""
    seen: dict[str, int] = {}
    for line, job, errors in checked_items(text, progress):
        if job is not None:
            key = job.key
            if key in seen:
                yield line, None, [defined_twice(line, key, seen[key])]
                continue
            seen[key] = line
        yield line, job, errors


def defined_twice(line: int, key: str, first: int) -> JobFileError:
    """The error of a job defined again on ``line`` (first on line ``first``)."""
    return JobFileError(line, "job_id", f"also defined on line {first}", key)


def parse_job_file(
    text: str, progress: Progress | None = None
) -> tuple[list[JobDefinition], list[JobFileError]]:
    """All jobs in ``text`` and every error found (both lists complete); ``progress`` hears
    of the ``validating`` stage."""
    jobs: list[JobDefinition] = []
    errors: list[JobFileError] = []
    for _, job, problems in check_job_file(text, progress):
        if job is not None:
            jobs.append(job)
        errors.extend(problems)
    return jobs, errors

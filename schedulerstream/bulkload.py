"""A job file made ready for ``schedules put``: every item validated, every job encoded and
checked against the record limits before anything is produced (a file with any error writes
nothing).

A JSON-lines file of at least ``PIECE_MIN_LINES`` lines is cut into one piece per process.
The pieces after the first are checked by forked worker processes while this process checks
the first, and every piece's items are then taken in line order. The result is the one a
single process reaches: the same errors in the same order, the same versions. The workers
are forked before the publisher's producer exists, so no Kafka client thread is forked.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from schedulerstream.errors import ValidationError
from schedulerstream.jobfile import (
    PROGRESS_STEP,
    Checked,
    JobFileError,
    Progress,
    check_line,
    checked_items,
    defined_twice,
    json_lines,
)
from schedulerstream.publish import JobEncoder, Publisher, now_us
from schedulerstream.sqs_regions import region_refusals

PIECE_MIN_LINES = 4_000  # below: one process (a fork and its results cost more than it saves)
Record = tuple[bytes, bytes | None]
EncoderAt = Callable[[int], JobEncoder]  # the encoder whose first job is the item at an index


@dataclass(frozen=True)
class Item:
    """One item of the file: its line; the job's key when it is valid; its problems (a valid
    job's are its region refusals); and, once encoded, its version and record or the record
    limit it breaks. A piece stops encoding at its first problem: no record after it is
    written."""

    line: int
    key: str | None
    errors: tuple[JobFileError, ...]
    version: int = 0
    record: Record | None = None
    over: str | None = None


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` found: each job's (key, version) and record, or every error (the
    first job over a record limit when there is nothing else)."""

    written: list[tuple[str, int]]
    records: list[Record]
    errors: list[str]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def prepare(
    publisher: Publisher,
    text: str,
    progress: Progress | None = None,
    processes: int | None = None,
) -> Prepared:
    """Check and encode every item of ``text``, in ``processes`` processes (default: one a
    usable core) when the file is long JSON lines and ``publisher`` has not connected yet;
    ``publisher`` is connected before this returns."""
    base = now_us()

    def encoder_at(index: int) -> JobEncoder:
        return publisher.encoder(base + index)

    written: list[tuple[str, int]] = []
    records: list[Record] = []
    errors: list[str] = []
    over: str | None = None
    seen: dict[str, int] = {}
    for item in _items(publisher, text, encoder_at, progress, processes):
        if item.key is not None:
            first = seen.get(item.key)
            if first is not None:
                errors.append(str(defined_twice(item.line, item.key, first)))
                continue
            seen[item.key] = item.line
        errors.extend(str(error) for error in item.errors)
        if item.key is None or errors or over is not None:
            continue
        if item.over is not None:
            over = item.over
            continue
        assert item.record is not None, f"line {item.line} was not encoded"
        written.append((item.key, item.version))
        records.append(item.record)
    if errors or over is not None:
        return Prepared([], [], errors or [str(over)])
    return Prepared(written, records, [])


def _items(
    publisher: Publisher,
    text: str,
    encoder_at: EncoderAt,
    progress: Progress | None,
    processes: int | None,
) -> Iterator[Item]:
    lines = json_lines(text)
    count = processes or usable_cores()
    if publisher.connected or lines is None or count < 2 or len(lines) < PIECE_MIN_LINES:
        publisher.connect()
        yield from _piece(checked_items(text, progress), encoder_at(0))
        return
    yield from _in_pieces(publisher, lines, encoder_at, progress, count)


def _piece(checked: Iterable[Checked], encoder: JobEncoder) -> Iterator[Item]:
    """The items of one piece, each valid job encoded until the piece's first problem."""
    failed = False
    for line, job, problems in checked:
        if job is None:
            failed = True
            yield Item(line, None, tuple(problems))
            continue
        refusals = tuple(JobFileError(line, *r, job.key) for r in region_refusals(job))
        if failed or refusals:
            failed = True
            yield Item(line, job.key, refusals)
            continue
        try:
            version, record = encoder.encode(job)
        except ValidationError as exc:
            failed = True
            yield Item(line, job.key, (), over=f"{exc.field}: {exc.message}")
            continue
        yield Item(line, job.key, (), version, record)


def _told(checked: Iterable[Checked], progress: Progress | None, total: int) -> Iterator[Checked]:
    """``checked`` as it goes, told to ``progress`` (the first piece's share of ``total``)."""
    for done, item in enumerate(checked, 1):
        if progress is not None and done % PROGRESS_STEP == 0:
            progress("validating", done, total)
        yield item


# What the forked workers read: the file's lines and the encoders (set before they fork).
_work: tuple[list[tuple[int, str]], EncoderAt] | None = None


def _worker_piece(start: int, end: int) -> list[Item]:
    assert _work is not None, "a piece worker runs in a process forked by _in_pieces"
    lines, encoder_at = _work
    checked = (check_line(line, raw) for line, raw in lines[start:end])
    return list(_piece(checked, encoder_at(start)))


def _in_pieces(
    publisher: Publisher,
    lines: list[tuple[int, str]],
    encoder_at: EncoderAt,
    progress: Progress | None,
    count: int,
) -> Iterator[Item]:
    global _work
    size = -(-len(lines) // count)
    bounds = [(start, min(start + size, len(lines))) for start in range(0, len(lines), size)]
    _work = (lines, encoder_at)
    try:
        fork = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(len(bounds) - 1, mp_context=fork) as pool:
            futures = [pool.submit(_worker_piece, *b) for b in bounds[1:]]  # forks them all
            publisher.connect()  # after the fork: its threads stay in this process
            first = bounds[0][1]
            checked = (check_line(line, raw) for line, raw in lines[:first])
            pieces = [list(_piece(_told(checked, progress, len(lines)), encoder_at(0)))]
            pieces.extend(future.result() for future in futures)
            for items, (_, end) in zip(pieces, bounds, strict=True):
                if progress is not None:
                    progress("validating", end, len(lines))
                yield from items
    finally:
        _work = None

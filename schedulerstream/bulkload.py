"""A job file made ready for ``schedules put``: every item validated, every job encoded and
checked against the record limits before anything is produced (a file with any error writes
nothing).

On Linux a JSON-lines file of at least two ``PIECE_LINES`` is cut into pieces, one a
process: this one checks the first while forked workers check the others, and every piece's
items are then taken in line order. The result is the one a single process reaches: the
same errors in the same order, the same versions, the same exception where one process
would raise. The workers are forked before the publisher's producer exists (no Kafka client
thread is forked); a fork or a worker that fails leaves the file to this process alone.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import NamedTuple

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
from schedulerstream.model import JobDefinition, topic_refusals
from schedulerstream.publish import JobEncoder, Publisher, now_us
from schedulerstream.sqs_regions import region_refusals

PIECE_LINES = 2_000  # the fewest lines a piece gets: a fork costs more than a smaller one saves
Record = tuple[bytes, bytes | None]
EncoderAt = Callable[[int], JobEncoder]  # the encoder whose first job is the item at an index


class Item(NamedTuple):
    """One item of the file: its line; the job's key when it is valid; its problems (a valid
    job's are its region and reserved-topic refusals); and, once encoded, its version and
    record, the record limit it breaks, or what its encoding raised. A piece stops encoding
    after its first problem: no record after it is written."""

    line: int
    key: str | None
    errors: tuple[JobFileError, ...]
    version: int = 0
    record: Record | None = None
    over: str | None = None
    raised: BaseException | None = None


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` found: each job's (key, version) and record, or every error (the
    first job over a record limit when there is nothing else)."""

    written: list[tuple[str, int]]
    records: list[Record]
    errors: list[str]


def usable_cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def prepare(
    publisher: Publisher,
    text: str,
    progress: Progress | None = None,
    processes: int | None = None,
) -> Prepared:
    """Check and encode every item of ``text``, in up to ``processes`` processes (default:
    one a usable core) when the file allows pieces and ``publisher`` has not connected yet;
    ``publisher`` is connected before this returns. Raises what encoding a job raised, when
    one process would reach that job."""
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
        if item.raised is not None:
            raise item.raised
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
    count = 1
    can_fork = sys.platform == "linux" and not publisher.connected
    if lines is not None and can_fork and len(lines) >= 2 * PIECE_LINES:
        count = min(processes or usable_cores(), len(lines) // PIECE_LINES)
    if lines is not None and count >= 2:
        pieces = _in_pieces(publisher, lines, encoder_at, progress, count)
        if pieces is not None:
            yield from pieces
            return
    publisher.connect()
    prefix = publisher.settings.topic_prefix
    yield from _piece(checked_items(text, progress, lines), encoder_at(0), prefix)


def _refusals(job: JobDefinition, prefix: str) -> list[tuple[str, str]]:
    return region_refusals(job) + topic_refusals(job, prefix)


def _piece(checked: Iterable[Checked], encoder: JobEncoder, prefix: str) -> Iterator[Item]:
    """The items of one piece, each valid job encoded until the piece's first problem
    (``prefix``: the deployment's topic prefix, whose topics no job may target)."""
    failed = False
    for line, job, problems in checked:
        if job is None:
            failed = True
            yield Item(line, None, tuple(problems))
            continue
        refusals = tuple(JobFileError(line, *r, job.key) for r in _refusals(job, prefix))
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
        except Exception as exc:  # raised by prepare if one process would get this far
            failed = True
            yield Item(line, job.key, (), raised=exc)
            continue
        yield Item(line, job.key, (), version, record)


def _told(checked: Iterable[Checked], progress: Progress | None, total: int) -> Iterator[Checked]:
    """``checked`` as it goes, told to ``progress`` (the first piece's share of ``total``)."""
    for done, item in enumerate(checked, 1):
        if progress is not None and done % PROGRESS_STEP == 0:
            progress("validating", done, total)
        yield item


# A worker's file and encoders: set by ``_init_worker`` in the forked process.
_work: tuple[list[tuple[int, str]], EncoderAt, str] | None = None


def _init_worker(lines: list[tuple[int, str]], encoder_at: EncoderAt, prefix: str) -> None:
    global _work
    _work = (lines, encoder_at, prefix)


def _worker_piece(start: int, end: int) -> list[Item]:
    assert _work is not None, "a piece worker runs in a process forked by _in_pieces"
    lines, encoder_at, prefix = _work
    checked = (check_line(line, raw) for line, raw in lines[start:end])
    return list(_piece(checked, encoder_at(start), prefix))


def _in_pieces(
    publisher: Publisher,
    lines: list[tuple[int, str]],
    encoder_at: EncoderAt,
    progress: Progress | None,
    count: int,
) -> list[Item] | None:
    """Every item, the pieces after the first checked by ``count - 1`` forked workers; None
    when a worker could not be forked or did not finish (the caller checks alone)."""
    size = -(-len(lines) // count)
    bounds = [(start, min(start + size, len(lines))) for start in range(0, len(lines), size)]
    fork = multiprocessing.get_context("fork")
    prefix = publisher.settings.topic_prefix
    try:
        with ProcessPoolExecutor(len(bounds) - 1, mp_context=fork, initializer=_init_worker,
                                 initargs=(lines, encoder_at, prefix)) as pool:  # fmt: skip
            futures = [pool.submit(_worker_piece, *b) for b in bounds[1:]]  # forks them all
            publisher.connect()  # after the fork: its threads stay in this process
            first = bounds[0][1]
            checked = (check_line(line, raw) for line, raw in lines[:first])
            items = list(_piece(_told(checked, progress, len(lines)), encoder_at(0), prefix))
            for future, (_, end) in zip(futures, bounds[1:], strict=True):
                items.extend(future.result())
                if progress is not None:
                    progress("validating", end, len(lines))
    except (OSError, BrokenProcessPool):
        return None
    return items

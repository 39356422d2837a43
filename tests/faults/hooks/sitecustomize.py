"""Test-only (tests/faults): SIGSTOP a processor process at a chosen point of its loop.

Put this directory first on PYTHONPATH of a processor process and set
``SS_TEST_STOP_AT=<point>`` and ``SS_TEST_STOP_FILE=<path>``. Once ``<path>`` exists, the
process deletes it, writes the wall-clock time to ``<path>.at`` and SIGSTOPs itself (the whole
process, every thread, as an external SIGSTOP would) the next time it reaches ``<point>``:

- ``punctuate``: the start of ``Processor._punctuate`` (a poll just returned, the timers are
  about to run), 0.6-0.8 s past a wall-clock second: a dispatcher of 1 s schedules then holds
  the runs due at the next second (emitted 1 s ahead) in its queues;
- ``commit``: ``TransactionalProducer.commit`` (step 3 of the commit protocol), a transaction
  open with its records and offsets sent.

An external SIGSTOP lands at any of these points at random; these make a case deterministic.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

POINT = os.environ.get("SS_TEST_STOP_AT", "")
TRIGGER = Path(os.environ.get("SS_TEST_STOP_FILE", "/nonexistent"))


def _stop_if_triggered() -> None:
    try:
        TRIGGER.unlink()
    except FileNotFoundError:
        return
    TRIGGER.with_name(TRIGGER.name + ".at").write_text(repr(time.time()))
    os.kill(os.getpid(), signal.SIGSTOP)


def _install() -> None:
    from schedulerstream.runtime.processor import Processor
    from schedulerstream.runtime.transaction import TransactionalProducer

    if POINT == "punctuate":
        punctuate = Processor._punctuate

        def stopping_punctuate(self: Any) -> None:
            if 0.6 <= time.time() % 1 < 0.8:
                _stop_if_triggered()
            punctuate(self)

        Processor._punctuate = stopping_punctuate  # type: ignore[method-assign]
    elif POINT == "commit":
        commit = TransactionalProducer.commit

        def stopping_commit(self: Any, attempts: int = 3) -> None:
            _stop_if_triggered()
            commit(self, attempts)

        TransactionalProducer.commit = stopping_commit  # type: ignore[method-assign]
    else:
        raise ValueError(f"SS_TEST_STOP_AT={POINT!r}: expected punctuate or commit")


if POINT:
    _install()

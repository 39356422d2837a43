"""Test-only (tests/faults): stop or kill a processor process at a chosen point. Put this
directory first on PYTHONPATH of a processor process; nothing of this is in the package.

SIGSTOP: set ``SS_TEST_STOP_AT=<point>`` and ``SS_TEST_STOP_FILE=<path>``. Once ``<path>``
exists, the process deletes it, writes the wall-clock time to ``<path>.at`` and SIGSTOPs itself
(the whole process, every thread, as an external SIGSTOP would) the next time it reaches
``<point>``; with ``SS_TEST_STOP_SCOPE=group`` its whole process group stops (a dispatcher's
delivery process too, as in a frozen container or VM):

- ``punctuate``: the start of ``Processor._punctuate`` (a poll just returned, the timers are
  about to run), 0.6-0.8 s past a wall-clock second: a dispatcher of 1 s schedules then holds
  the runs due at the next second (emitted 1 s ahead) in its queues;
- ``commit``: ``TransactionalProducer.commit`` (step 4 of the commit protocol), a transaction
  open with its records and offsets sent;
- ``committed``: after step 4, before the local write (step 5) and ``after_commit`` (step 6),
  at a commit whose dispatcher holds committed starts not yet handed to its delivery loop.

SIGKILL: ``SS_FAULT_KILL_AT=<point>:<n>`` kills the process the n-th time a commit reaches
``<point>`` (the steps of ``Committer.commit``):

- ``before-commit``: offsets sent (step 3), ``commit_transaction`` not called (step 4);
- ``during-commit``: a timer kills ``SS_FAULT_DELAY_MS`` (default 2) ms after step 4 starts,
  so the kill lands while the EndTxn request is in flight (or just after it);
- ``before-local``: committed (step 4), the local WriteBatch not written (step 5);
- ``after-local``: after step 5 (the commit returned).

An external SIGSTOP or kill lands at any of these points at random; these make a case
deterministic.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

POINT = os.environ.get("SS_TEST_STOP_AT", "")
GROUP = os.environ.get("SS_TEST_STOP_SCOPE", "process") == "group"
TRIGGER = Path(os.environ.get("SS_TEST_STOP_FILE", "/nonexistent"))
KILL_ENV = "SS_FAULT_KILL_AT"
KILL_POINTS = ("before-commit", "during-commit", "before-local", "after-local")


def _stop_if_triggered() -> None:
    try:
        TRIGGER.unlink()
    except FileNotFoundError:
        return
    TRIGGER.with_name(TRIGGER.name + ".at").write_text(repr(time.time()))
    if GROUP:
        os.killpg(0, signal.SIGSTOP)
    else:
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
    elif POINT == "committed":
        from schedulerstream.runtime.committer import Committer

        write_local = Committer._write_local

        def stopping_write_local(self: Any, task: Any) -> bool:
            applier = getattr(self.topology, "applier", None)  # the dispatcher's
            if applier is not None and any(applier.unsent.values()):
                _stop_if_triggered()
            return write_local(self, task)

        Committer._write_local = stopping_write_local  # type: ignore[method-assign]
    else:
        raise ValueError(f"SS_TEST_STOP_AT={POINT!r}: expected punctuate, commit or committed")


if POINT:
    _install()


def _kill_plan(value: str) -> tuple[str, int] | None:
    point, _, count = value.partition(":")
    if not value:
        return None
    if point not in KILL_POINTS or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{KILL_ENV}={value!r}: expected <{'|'.join(KILL_POINTS)}>:<n >= 1>")
    return point, int(count)


def _install_kill(point: str, n: int) -> None:
    from schedulerstream.runtime.committer import Committer
    from schedulerstream.runtime.transaction import TransactionalProducer

    delay_s = int(os.environ.get("SS_FAULT_DELAY_MS", "2")) / 1000
    seen = [0]

    def kill() -> None:
        sys.stderr.write(f"fault injection: SIGKILL at {point} #{seen[0]}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def reached() -> bool:
        seen[0] += 1
        return seen[0] == n

    if point == "after-local":
        commit = Committer.commit

        def killing_commit(self: Any, *args: Any, **kwargs: Any) -> bool:
            done: bool = commit(self, *args, **kwargs)
            if done and reached():
                kill()
            return done

        Committer.commit = killing_commit  # type: ignore[method-assign]
        return
    end = TransactionalProducer.commit

    def killing_end(self: Any, attempts: int = 3) -> None:
        if point == "before-commit" and reached():
            kill()
        if point == "during-commit" and reached():
            threading.Timer(delay_s, kill).start()
        end(self, attempts)
        if point == "before-local" and reached():
            kill()

    TransactionalProducer.commit = killing_end  # type: ignore[method-assign]


_PLAN = _kill_plan(os.environ.get(KILL_ENV, ""))
if _PLAN is not None:
    _install_kill(*_PLAN)

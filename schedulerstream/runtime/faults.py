"""Test-only fault injection at the steps of ``Processor.commit`` (tests/faults uses it).

``SS_FAULT_KILL_AT=<point>:<n>`` makes this process SIGKILL itself the n-th time a commit
that holds something reaches ``point``:

- ``before-commit``: offsets sent (step 2), ``commit_transaction`` not called (step 3);
- ``during-commit``: a timer thread kills ``SS_FAULT_DELAY_MS`` (default 2) ms after step 3
  starts, so the kill lands while the EndTxn request is in flight (or just after it);
- ``before-local``: committed (step 3), the local WriteBatch not written (step 4);
- ``after-local``: after step 4.

The variable is read once at import. Unset (always, outside those tests), ``reached`` only
compares a string and returns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

ENV = "SS_FAULT_KILL_AT"
POINTS = ("before-commit", "during-commit", "before-local", "after-local")


def _parse(value: str) -> tuple[str, int] | None:
    point, _, count = value.partition(":")
    if not value:
        return None
    if point not in POINTS or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV}={value!r}: expected <{'|'.join(POINTS)}>:<n ≥ 1>")
    return point, int(count)


_PLAN = _parse(os.environ.get(ENV, ""))
_DELAY_S = int(os.environ.get("SS_FAULT_DELAY_MS", "2")) / 1000
_seen = 0


def reached(point: str) -> None:
    """Called by the processor at each commit step; kills the process when planned."""
    global _seen
    if _PLAN is None or _PLAN[0] != point:
        return
    _seen += 1
    if _seen != _PLAN[1]:
        return
    if point == "during-commit":
        threading.Timer(_DELAY_S, _kill, (point,)).start()
    else:
        _kill(point)


def _kill(point: str) -> None:
    sys.stderr.write(f"fault injection: SIGKILL at {point} #{_seen}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)

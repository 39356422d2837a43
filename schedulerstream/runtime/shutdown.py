"""Signal handling: SIGTERM/SIGINT finish the current transaction and leave the group;
SIGUSR2 writes every thread's stack to stderr (to see where a process that does not stop is).

A process that has not stopped ``deadline_s`` after SIGTERM/SIGINT writes its stacks and exits
with 75: a stop must not hang on a call that never returns (its successor has taken its
partitions over by then; it is as if it were killed). The deadline is kept by a thread that
reads Python's signal wakeup fd, so it holds even while the main thread is inside a C call
that does not let the Python handler run."""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
from types import FrameType
from typing import Protocol


class Stoppable(Protocol):
    def stop(self) -> None: ...


STOP_DEADLINE_S = 30.0
EXIT_STUCK = 75  # EX_TEMPFAIL: stopped by the deadline, not by itself


def install_signal_handlers(
    processor: Stoppable,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT),
    deadline_s: float = STOP_DEADLINE_S,
) -> None:
    """Make ``signals`` call ``processor.stop()``: ``run()`` then commits, closes the
    consumer (leaving the group) and closes the stores before returning. SIGUSR2 dumps the
    threads' stacks, even while the main thread is inside a C call. The process exits
    ``deadline_s`` after the first of ``signals`` if it is still there."""

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        os.write(2, f"{name}: stopping after the current step\n".encode())  # safe in a handler
        processor.stop()

    for sig in signals:
        signal.signal(sig, handler)
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    _keep_deadline({int(sig) for sig in signals}, deadline_s)


def _keep_deadline(signals: set[int], deadline_s: float) -> None:
    """Exit ``deadline_s`` after one of ``signals`` arrives (seen on the wakeup fd)."""
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    signal.set_wakeup_fd(writable, warn_on_full_buffer=False)

    def guard() -> None:
        while not any(number in signals for number in os.read(readable, 64)):
            pass
        threading.Event().wait(deadline_s)  # a timer: nothing sets it
        os.write(2, f"not stopped {deadline_s:g} s after the signal: exiting\n".encode())
        faulthandler.dump_traceback(all_threads=True)
        os._exit(EXIT_STUCK)

    threading.Thread(target=guard, name="stop-deadline", daemon=True).start()

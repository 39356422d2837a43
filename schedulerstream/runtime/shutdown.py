"""Signal handling: SIGTERM/SIGINT finish the current transaction and leave the group;
SIGUSR2 writes every thread's stack to stderr (to see where a process that does not stop is)."""

from __future__ import annotations

import faulthandler
import os
import signal
from types import FrameType
from typing import Protocol


class Stoppable(Protocol):
    def stop(self) -> None: ...


def install_signal_handlers(
    processor: Stoppable, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
) -> None:
    """Make ``signals`` call ``processor.stop()``: ``run()`` then commits, closes the
    consumer (leaving the group) and closes the stores before returning. SIGUSR2 dumps the
    threads' stacks, even while the main thread is inside a C call."""

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        os.write(2, f"{name}: stopping after the current step\n".encode())  # safe in a handler
        processor.stop()

    for sig in signals:
        signal.signal(sig, handler)
    faulthandler.register(signal.SIGUSR2, all_threads=True)

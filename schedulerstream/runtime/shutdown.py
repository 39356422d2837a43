"""Signal handling: SIGTERM/SIGINT finish the current transaction and leave the group."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Protocol


class Stoppable(Protocol):
    def stop(self) -> None: ...


def install_signal_handlers(
    processor: Stoppable, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
) -> None:
    """Make ``signals`` call ``processor.stop()``: ``run()`` then commits, closes the
    consumer (leaving the group) and closes the stores before returning."""

    def handler(signum: int, frame: FrameType | None) -> None:
        processor.stop()

    for sig in signals:
        signal.signal(sig, handler)

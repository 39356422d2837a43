"""A watchdog for blocking client calls that overrun their own timeout.

librdkafka's transactional calls can block far past the timeout they are given (seen after a
broker restart: ``send_offsets_to_transaction`` stuck for minutes while the group coordinator
was gone; librdkafka issues #5456, #5511). A stuck call holds the processor's only thread: no
commit, no heartbeat of its own, not even SIGTERM. Nothing can interrupt a C call from Python,
so the watchdog ends the process with a clear message and ``EXIT_HUNG``; a supervisor (systemd,
Kubernetes, ``schedulerstream dev``) restarts it and the new process restores from the
changelog, like after any crash.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

EXIT_HUNG = 75  # EX_TEMPFAIL: try again (restart)


class Watchdog:
    """Arms a deadline around one blocking call at a time; ``on_hung`` runs if it passes."""

    def __init__(self, on_hung: Callable[[str, float], None] | None = None) -> None:
        self._on_hung = on_hung or _exit_hung
        self._lock = threading.Lock()
        self._armed: tuple[str, float, float] | None = None  # (what, started, deadline)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def guard(self, what: str, limit_s: float) -> Iterator[None]:
        """Run the ``with`` body under a deadline of ``limit_s`` seconds."""
        now = time.monotonic()
        with self._lock:
            self._armed = (what, now, now + limit_s)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="watchdog", daemon=True)
                self._thread.start()
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._armed = None

    def _watch(self) -> None:
        while True:
            with self._lock:
                armed = self._armed
            if armed is None:
                self._wake.wait()
                self._wake.clear()
                continue
            what, started, deadline = armed
            left = deadline - time.monotonic()
            if left > 0:
                self._wake.wait(min(left, 1.0))
                self._wake.clear()
                continue
            with self._lock:
                still = self._armed is armed
            if still:
                self._on_hung(what, time.monotonic() - started)
                return


def _exit_hung(what: str, elapsed_s: float) -> None:
    log.critical(
        "%s has not returned after %.0f s, past its own timeout: the client is stuck; "
        "exiting (code %d) so a supervisor restarts this process from the changelog",
        what, elapsed_s, EXIT_HUNG,
    )  # fmt: skip
    logging.shutdown()
    os._exit(EXIT_HUNG)

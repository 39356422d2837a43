"""Wait for a condition, never for a while: the one polling helper the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.procs import ProcessorProcess


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.25,
    alive: ProcessorProcess | None = None,
) -> Any:
    """Poll ``predicate`` until it returns something true and return that; fail after
    ``timeout`` seconds, or at once when the ``alive`` process has exited (with its log's
    tail either way)."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if alive is not None and not alive.alive():
            raise AssertionError(f"{what}: the process exited:\n{alive.log()[-3000:]}")
        if time.monotonic() > deadline:
            tail = f":\n{alive.log()[-3000:]}" if alive is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{tail}")
        time.sleep(every)

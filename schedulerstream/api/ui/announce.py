"""The console's URL for ``schedulerstream dev``: said once the API it supervises answers
``/readyz``, so the printed URL opens a console that can sign in."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

API_READY = "api: ready"  # the Supervisor's line when the api component says it is ready
POLL_S = 0.5
WAIT_S = 120.0


def console_url(port: int, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{port}/ui"


def ready(base: str, timeout: float = 2.0) -> bool:
    """Whether ``base``/readyz answers 200."""
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=timeout) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def say_when_ready(port: int, say: Callable[[str], None], wait_s: float = WAIT_S) -> bool:
    """Poll the API on ``port`` until ready (at most ``wait_s``); say the console's URL."""
    url = console_url(port)
    deadline = time.monotonic() + wait_s
    while not ready(url.removesuffix("/ui")):
        if time.monotonic() >= deadline:
            say(f"console: the API is not ready after {wait_s:g} s; it will be at {url}")
            return False
        threading.Event().wait(POLL_S)
    say(f"console: {url} (sign in with a key from `schedulerstream tenants create NAME`)")
    return True


def with_console_url(port: int, say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` that, after the API's ready line, also says the console's URL once /readyz
    answers (in the background; again after a restart). Port 0 (a random port) has no URL."""

    def relay(line: str) -> None:
        say(line)
        if line == API_READY and port:
            threading.Thread(
                target=say_when_ready, args=(port, say), name="console-url", daemon=True
            ).start()

    return relay

"""The watchdog around blocking client calls: a call that overruns its limit ends the process
(code 75, a clear message) so a supervisor restarts it; a call that returns in time does not."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from schedulerstream.runtime.watchdog import EXIT_HUNG, Watchdog


def test_a_call_that_returns_in_time_is_left_alone() -> None:
    hung: list[str] = []
    watchdog = Watchdog(lambda what, _: hung.append(what))
    for _ in range(3):
        with watchdog.guard("quick", 0.3):
            time.sleep(0.05)
    time.sleep(0.5)
    assert hung == []


def test_a_call_past_its_limit_is_reported_once() -> None:
    fired = threading.Event()
    hung: list[tuple[str, float]] = []

    def on_hung(what: str, elapsed: float) -> None:
        hung.append((what, elapsed))
        fired.set()

    watchdog = Watchdog(on_hung)
    with watchdog.guard("send_offsets_to_transaction", 0.2):
        assert fired.wait(5)
    assert [w for w, _ in hung] == ["send_offsets_to_transaction"]
    assert hung[0][1] >= 0.2


def test_a_stuck_process_exits_with_the_hung_code_and_says_why() -> None:
    script = (
        "import logging, time\n"
        "from schedulerstream.runtime.watchdog import Watchdog\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "with Watchdog().guard('commit_transaction', 0.3):\n"
        "    time.sleep(30)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=20)  # fmt: skip
    assert done.returncode == EXIT_HUNG
    assert time.monotonic() - started < 15
    assert "commit_transaction has not returned" in done.stderr

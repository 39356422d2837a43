"""Signals of a processor process: SIGTERM asks it to stop, SIGUSR2 dumps its threads' stacks
to stderr even while the main thread is inside a blocking call."""

from __future__ import annotations

import signal
import subprocess
import sys

PROGRAM = """
import sys, threading
from schedulerstream.runtime.shutdown import install_signal_handlers

class Waiting:
    def __init__(self):
        self.stopped = threading.Event()
    def stop(self):
        self.stopped.set()

waiting = Waiting()
install_signal_handlers(waiting)
print("ready", flush=True)
while not waiting.stopped.wait(0.05):
    pass
print("stopped", flush=True)
"""


def test_sigusr2_dumps_the_stacks_and_sigterm_stops() -> None:
    process = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGUSR2)  # written by the C handler, at once
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and out == "stopped\n"
    assert "most recent call first" in err and "<string>" in err

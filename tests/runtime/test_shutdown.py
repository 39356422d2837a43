"""Signals of a processor process: SIGTERM asks it to stop, SIGUSR2 dumps its threads' stacks
to stderr even while the main thread is inside a blocking call, and a process that does not
stop within the deadline after SIGTERM writes its stacks and exits with 75."""

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


STUCK = """
import sys, threading
from schedulerstream.runtime.shutdown import install_signal_handlers

class Deaf:
    def stop(self):
        print("asked", flush=True)

install_signal_handlers(Deaf(), deadline_s=1.0)
print("ready", flush=True)
threading.Event().wait()  # never returns: the stop it was asked for never happens
"""


def test_a_process_that_does_not_stop_exits_after_the_deadline() -> None:
    process = subprocess.Popen([sys.executable, "-c", STUCK], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 75 and out == "asked\n"
    assert "not stopped 1 s after the signal: exiting" in err
    assert "most recent call first" in err and "<string>" in err

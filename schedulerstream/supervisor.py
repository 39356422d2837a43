"""Run several components as child processes: prefixed output, restart on crash, clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

READY_MARK = " ready"
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0)


@dataclass
class Component:
    """One supervised child: ``schedulerstream <args>`` with extra environment."""

    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    restarts: int = 0
    ready: bool = False


class Supervisor:
    """Starts components, echoes their logs with a prefix, restarts crashed ones."""

    def __init__(self, components: list[Component], say: Callable[[str], None]) -> None:
        self.components = components
        self.say = say
        self._stopping = threading.Event()

    def _spawn(self, component: Component) -> None:
        env = {**os.environ, **component.env}
        command = [sys.executable, "-m", "schedulerstream.cli", *component.args]
        component.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        threading.Thread(target=self._pump, args=(component,), daemon=True).start()

    def _pump(self, component: Component) -> None:
        assert component.process is not None and component.process.stdout is not None
        for line in component.process.stdout:
            sys.stderr.write(f"[{component.name}] {line}")
            if not component.ready and READY_MARK in line:
                component.ready = True
                self.say(f"{component.name}: ready")

    def run(self) -> int:
        """Block until SIGINT/SIGTERM; then stop every child and return 0."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self._stopping.set())
        for component in self.components:
            self._spawn(component)
        while not self._stopping.wait(0.5):
            for component in self.components:
                process = component.process
                if (
                    process is not None
                    and process.poll() is not None
                    and not self._stopping.is_set()
                ):
                    delay = RESTART_BACKOFF_S[min(component.restarts, len(RESTART_BACKOFF_S) - 1)]
                    self.say(
                        f"{component.name}: exited with {process.returncode}; restart in {delay:g}s"
                    )
                    component.restarts += 1
                    component.ready = False
                    time.sleep(delay)
                    self._spawn(component)
        self.stop()
        return 0

    def stop(self, timeout: float = 20.0) -> None:
        for component in self.components:
            if component.process is not None and component.process.poll() is None:
                os.killpg(component.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for component in self.components:
            process = component.process
            if process is None:
                continue
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            self.say(f"{component.name}: stopped")

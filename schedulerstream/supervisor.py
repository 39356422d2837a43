"""Run several components as child processes: prefixed output, restart on crash, clean stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schedulerstream.settings import ENV_PREFIX, Settings

READY_MARK = " ready"
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0)
STABLE_S = 60.0  # a child that ran this long before it exited starts the backoff over
INSTANCE_ID = f"{ENV_PREFIX}INSTANCE_ID"
DATA_DIR = f"{ENV_PREFIX}DATA_DIR"
METRICS_PORT = f"{ENV_PREFIX}METRICS_PORT"


@dataclass
class Component:
    """One supervised child: ``schedulerstream <args>`` with extra environment."""

    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    restarts: int = 0
    ready: bool = False
    started_at: float = 0.0
    restart_at: float | None = None  # monotonic time of the pending restart


def members(name: str, args: list[str], processes: int, settings: Settings) -> list[Component]:
    """``processes`` members of one group. Member k (from 1) is ``{name}-{k}`` with instance
    id ``{instance_id}-{k}`` (its transactional id: stable across its restarts), data dir
    ``{data_dir}/{name}-{k}`` (no two members share a partition's state store) and metrics
    port ``metrics_port + k - 1`` (none when it is 0). A single member keeps the settings."""
    if processes == 1:
        return [Component(name, args)]
    return [
        Component(
            f"{name}-{k}",
            args,
            {
                INSTANCE_ID: f"{settings.instance_id}-{k}",
                DATA_DIR: str(settings.data_dir / f"{name}-{k}"),
                METRICS_PORT: str(settings.metrics_port + k - 1 if settings.metrics_port else 0),
            },
        )
        for k in range(1, processes + 1)
    ]


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
        component.started_at = time.monotonic()
        component.restart_at = None
        self.say(f"{component.name}: started (pid {component.process.pid})")
        threading.Thread(target=self._pump, args=(component,), daemon=True).start()

    def _pump(self, component: Component) -> None:
        assert component.process is not None and component.process.stdout is not None
        for line in component.process.stdout:
            sys.stderr.write(f"[{component.name}] {line}")
            if not component.ready and READY_MARK in line:
                component.ready = True
                self.say(f"{component.name}: ready")

    def _check(self, component: Component) -> None:
        """Schedule the restart of an exited child (with backoff), or restart it when due."""
        process = component.process
        if process is None or process.poll() is None:
            return
        now = time.monotonic()
        if component.restart_at is None:
            if now - component.started_at >= STABLE_S:
                component.restarts = 0
            delay = RESTART_BACKOFF_S[min(component.restarts, len(RESTART_BACKOFF_S) - 1)]
            self.say(f"{component.name}: exited with {process.returncode}; restart in {delay:g}s")
            component.restarts += 1
            component.ready = False
            component.restart_at = now + delay
        elif now >= component.restart_at:
            self._spawn(component)

    def run(self) -> int:
        """Block until SIGINT/SIGTERM; then stop every child: 0 when each exited with 0."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self._stopping.set())
        for component in self.components:
            self._spawn(component)
        while not self._stopping.wait(0.5):
            for component in self.components:
                self._check(component)
        return 0 if self.stop() else 1

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM every running child, SIGKILL what is left after ``timeout``; True when each
        of them exited with 0 (or was stopped by that SIGTERM while it started)."""
        running = [c for c in self.components if c.process is not None and c.process.poll() is None]
        for component in running:
            assert component.process is not None
            with contextlib.suppress(ProcessLookupError):  # it has just exited
                os.killpg(component.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        clean = True
        for component in running:
            process = component.process
            assert process is not None
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            # -SIGTERM: it was stopped before it had set up its handler, with nothing to finish
            clean = clean and process.returncode in (0, -signal.SIGTERM)
            self.say(f"{component.name}: stopped (exit {process.returncode})")
        return clean

"""Real processor processes for tests: start, SIGTERM, SIGKILL, SIGSTOP/SIGCONT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from schedulerstream.settings import Settings


def settings_env(settings: Settings, **overrides: object) -> dict[str, str]:
    """The environment that makes a child process load exactly ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    for name, value in {**settings.model_dump(), **overrides}.items():
        if value is None:  # unset (e.g. no Kafka config file): the default applies
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"SCHEDULERSTREAM_{name.upper()}"] = text
    return env


class ProcessorProcess:
    """``schedulerstream <component>`` in its own process group, logging to a file."""

    def __init__(
        self, settings: Settings, component: str, instance: str, log_dir: Path, **overrides: object
    ) -> None:
        self.settings = settings
        self.component = component
        self.instance = instance
        self.overrides = overrides
        self.log_path = log_dir / f"{component}-{instance}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ProcessorProcess:
        env = settings_env(self.settings, instance_id=self.instance, **self.overrides)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "schedulerstream.cli", self.component],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, needle: str, timeout: float = 60.0, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log().count(needle) >= count:
                return
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"{self.component} exited early:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} not seen in {self.log_path}:\n{self.log()[-3000:]}")

    def running_tasks(self) -> int:
        return self.log().count(" running: restored")

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.process.wait(10)
            raise AssertionError(
                f"{self.component} ignored SIGTERM:\n{self.log()[-3000:]}"
            ) from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

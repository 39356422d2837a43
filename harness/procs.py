"""Real local processes that the tests and the benches start: ``schedulerstream <component>``
(start, SIGTERM, SIGKILL, SIGSTOP/SIGCONT) and the scripted webhook receiver
(harness/webhook_receiver.py)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from schedulerstream.settings import Settings

RECEIVER = Path(__file__).resolve().parent / "webhook_receiver.py"


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
    """``schedulerstream <component>`` in its own process group, logging to a file; ``env``
    adds variables that are not settings, ``preexec`` runs in the child before it starts."""

    def __init__(
        self,
        settings: Settings,
        component: str,
        instance: str,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
        **overrides: object,
    ) -> None:
        self.settings = settings
        self.component = component
        self.instance = instance
        self.extra_env = dict(env or {})
        self.preexec = preexec
        self.overrides = overrides
        self.log_path = log_dir / f"{component}-{instance}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ProcessorProcess:
        env = settings_env(self.settings, instance_id=self.instance, **self.overrides)
        env.update(self.extra_env)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "schedulerstream.cli", self.component],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.preexec,
            )
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
            masks = self.signal_masks()
            self.signal(signal.SIGUSR2)  # its threads' stacks, to the log
            stacks = time.monotonic() + 5
            while "most recent call first" not in self.log() and time.monotonic() < stacks:
                time.sleep(0.1)
            self.signal(signal.SIGKILL)
            self.process.wait(10)
            raise AssertionError(
                f"{self.component} ignored SIGTERM:\n{self.log()[-8000:]}\n{masks}"
            ) from None

    def signal_masks(self) -> str:
        """Pending and blocked signals of the process and of each of its threads (/proc)."""
        assert self.process is not None
        lines = []
        wanted = ("Name", "Pid", "State", "SigPnd", "ShdPnd", "SigBlk")
        for status in sorted(Path(f"/proc/{self.process.pid}/task").glob("*/status")):
            try:
                text = status.read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
            lines.append(" ".join(f"{k}={fields.get(k, '?').strip()}" for k in wanted))
        return "signals by thread:\n" + "\n".join(lines)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL when it is still running after ``timeout``."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


def listening_port(process: subprocess.Popen[bytes], timeout: float) -> int:
    """The port a server started with ``--port 0`` announces on stdout (``listening on PORT``);
    it is stopped and RuntimeError raised when it says anything else or nothing in time."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline().decode() if ready else ""
    if not line.startswith("listening on "):
        stop_process(process)
        raise RuntimeError(f"{process.args!r} did not start (said {line!r})")
    return int(line.split()[-1])


class ReceiverProcess:
    """``harness/webhook_receiver.py`` on 127.0.0.1, a free port, in its own process."""

    def __init__(self, record: bool = True) -> None:
        self.record = record
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> ReceiverProcess:
        command = [sys.executable, str(RECEIVER), "--port", "0"]
        if not self.record:
            command.append("--no-record")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE)
        self.port = listening_port(self.process, timeout)
        return self

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def requests(self, webhook_id: str | None = None) -> list[dict[str, Any]]:
        """Recorded requests (of one webhook id), headers as a lower-cased dict."""
        with urllib.request.urlopen(self.url("/_requests"), timeout=10) as answer:
            found: list[dict[str, Any]] = json.load(answer)
        for entry in found:
            entry["headers"] = {k.lower(): v for k, v in entry["headers"]}
        if webhook_id is None:
            return found
        return [r for r in found if r["headers"].get("webhook-id") == webhook_id]

    def stop(self) -> None:
        stop_process(self.process)

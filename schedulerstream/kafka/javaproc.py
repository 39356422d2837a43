"""A detached JVM on this machine (the local broker, the Connect worker): started in its own
session with its output in a log file and its pid in a pid file, waited on until it answers,
stopped with SIGTERM and then SIGKILL. Only the process whose pid the file records is touched."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from schedulerstream.errors import SchedulerStreamError


def java_executable(error: type[SchedulerStreamError]) -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` from PATH (Kafka 4 needs Java 17+); ``error`` when
    there is neither."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise error("java is not on PATH and JAVA_HOME is not set (Java 17+ needed)")
    return java


@dataclass(frozen=True)
class JavaProcess:
    """One detached JVM, known by its pid file; failures raise ``error``."""

    name: str  # as messages name it: "broker", "Connect worker"
    pid_path: Path
    log_path: Path
    error: type[SchedulerStreamError]

    def recorded_pid(self) -> int | None:
        """The recorded pid, if that process is alive."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def start(self, arguments: Sequence[str]) -> int:
        """``java *arguments`` detached, output appended to the log; records and returns its pid."""
        command = [java_executable(self.error), *arguments]
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_raise_open_file_limit,
            )
        self.pid_path.write_text(str(process.pid))
        return process.pid

    def wait_until(self, answers: Callable[[], bool], where: str, timeout: float) -> None:
        """Block until ``answers()``; ``error`` when the process exits first or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if answers():
                return
            if self.recorded_pid() is None:
                raise self.error(
                    f"the {self.name} exited during start-up; log tail:\n{self.log_tail()}"
                )
            time.sleep(0.3)
        raise self.error(f"the {self.name} did not answer at {where} in {timeout:.0f} s")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0, kill: bool = False) -> int | None:
        """SIGTERM (SIGKILL with ``kill``) to the recorded process's group, SIGKILL after
        ``timeout``; the pid stopped, or None when none was running."""
        pid = self.recorded_pid()
        if pid is not None:
            os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and alive(pid):
                time.sleep(0.2)
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
                while alive(pid):
                    time.sleep(0.1)
        self.pid_path.unlink(missing_ok=True)
        return pid


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a child of this process that exited is reaped)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _raise_open_file_limit() -> None:
    """Let the JVM open as many files as the hard limit allows (a partition holds several)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

"""README's quick start, run as written against a real ``schedulerstream dev`` (issue #10).

The ```sh blocks of README's "Try it" section are read from README.md itself, so the two cannot
drift. Each block runs in the terminal its paragraph names ("in a second terminal", "Back in
the second terminal", ...): one bash session per terminal, fed the block's commands one by one
as a user types them. A command marked "Ctrl-C to stop" is interrupted with SIGINT to its process
group (what Ctrl-C does) once it has shown what it is there to show, before the next command of
its terminal; when it is the last command of its terminal it keeps running (as a receiver in its
own terminal does) and is interrupted at the end.

What differs from a user's machine, and only this: ``make dev`` is ``schedulerstream dev`` (what
the Makefile's dev target runs, checked below) with the shared test broker, a fresh topic prefix
and data dir, and 4 partitions; the API and receiver ports are free ones, substituted for 8080
and 9000 in the blocks; and output is unbuffered (``PYTHONUNBUFFERED``), as on a terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings

pytestmark = pytest.mark.kafka

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
SECTION = "## Try it"
TERMINAL = re.compile(r"\b(first|second|third|fourth|fifth) terminal\b", re.IGNORECASE)
CTRL_C = "Ctrl-C to stop"
API_PORT, RECEIVER_PORT = "8080", "9000"
MAX_LATENESS_S = 3.0  # a webhook later than this after its scheduled time fails the test
DELIVERY = re.compile(
    r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<run_id>\S+) attempt (?P<attempt>\d+) "
    r"\((?P<late>-?[\d.]+) s after its scheduled time\): (?P<verdict>[^;]+); "
    r"answered (?P<status>\d+)"
)


# -- README ----------------------------------------------------------------------------------


@dataclass
class Block:
    terminal: str
    commands: list[str]


def quick_start_blocks(text: str) -> list[Block]:
    """The section's sh blocks, each with the terminal named in the prose before it."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    blocks, prose_from = [], 0
    for match in re.finditer(r"```sh\n(.*?)```", section, re.DOTALL):
        prose = section[prose_from : match.start()]
        named = TERMINAL.findall(prose)
        assert named, f"the paragraph before this block names no terminal:\n{match.group(0)}"
        blocks.append(Block(named[-1].lower(), split_commands(match.group(1))))
        prose_from = match.end()
    assert blocks, f"no ```sh block in README's {SECTION!r} section"
    return blocks


def split_commands(script: str) -> list[str]:
    """The script's commands, a multi-line one whole (bash -n decides when one is complete)."""
    commands, pending = [], ""
    for line in script.splitlines():
        pending += line + "\n"
        if not pending.strip():
            pending = ""
            continue
        check = subprocess.run(["bash", "-n"], input=pending, capture_output=True, text=True)
        if check.returncode == 0 and not pending.rstrip().endswith("\\"):
            commands.append(pending.rstrip("\n"))
            pending = ""
    assert not pending.strip(), f"incomplete command at the end of a block: {pending!r}"
    return commands


def with_ports(command: str, api_port: int, receiver_port: int) -> str:
    command = command.replace(f"localhost:{API_PORT}", f"localhost:{api_port}")
    command = command.replace(f"--port {RECEIVER_PORT}", f"--port {receiver_port}")
    return command.replace(f"127.0.0.1:{RECEIVER_PORT}", f"127.0.0.1:{receiver_port}")


# -- terminals -------------------------------------------------------------------------------


class Terminal:
    """One bash session fed commands on stdin, as typed; job control on, so a command left
    running has its own process group to interrupt."""

    def __init__(self, name: str, cwd: Path, env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.logs = logs
        self.lines: list[str] = []
        self.jobs: list[Running] = []
        self._changed = threading.Condition()
        self._count = 0
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True, bufsize=1,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_as_a_terminal,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()
        self._send("set -m")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def _marker(self, kind: str, n: int, timeout: float) -> tuple[int, str]:
        """Wait for ``__QS_<kind>__ n value``: (its index in lines, value)."""
        pattern = re.compile(rf"^__QS_{kind}__ {n} (\S+)$")
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for i, line in enumerate(self.lines):
                    if found := pattern.match(line):
                        return i, found.group(1)
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"{self.name}: no {kind} marker {n}:\n{self.transcript()}")
                self._changed.wait(left)

    def run(self, command: str, timeout: float = 60) -> tuple[int, str]:
        """Run ``command`` to its end: (exit status, its output)."""
        self._count += 1
        n = self._count
        with self._changed:
            first = len(self.lines)
        # on a line of its own even after output without a final newline (curl's)
        self._send(f"{command}\n__qs=$?; printf '\\n__QS_DONE__ {n} %s\\n' $__qs")
        end, status = self._marker("DONE", n, timeout)
        output = [line for line in self.lines[first:end] if not re.match(r"^\[\d+\]", line)]
        return int(status), "\n".join(output).strip("\n")

    def start(self, command: str) -> Running:
        """Start ``command`` as a job whose output goes to its own file."""
        self._count += 1
        n = self._count
        out = self.logs / f"{self.name}-{n}.out"
        self._send(f"{{\n{command}\n}} > {out} 2>&1 &\necho __QS_PID__ {n} $!")
        _, pid = self._marker("PID", n, 30)
        job = Running(self, command, int(pid), out)
        self.jobs.append(job)
        return job

    def stop(self, job: Running, timeout: float = 30) -> int:
        """Ctrl-C: SIGINT to the job's process group, then its exit status."""
        self._count += 1
        n = self._count
        self._send(f"kill -INT -- -{job.pid}; wait {job.pid}; echo __QS_DONE__ {n} $?")
        _, status = self._marker("DONE", n, timeout)
        return int(status)

    def transcript(self) -> str:
        return f"--- terminal {self.name} ---\n" + "\n".join(self.lines[-200:])

    def close(self) -> None:
        """Kill what is left: each job has a process group of its own (job control)."""
        for job in self.jobs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _as_a_terminal() -> None:
    """A user's shell takes Ctrl-C: a suite started in the background of a non-interactive
    shell (``make test &``) ignores SIGINT, and a signal ignored when a shell starts stays
    ignored for everything it runs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@dataclass
class Running:
    terminal: Terminal
    command: str
    pid: int
    out: Path
    stopped: bool = field(default=False)

    def text(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""


def wait_for(
    what: str, condition: Callable[[], bool], timeout: float, context: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{context()}")
        time.sleep(0.1)


# -- expectations per command ----------------------------------------------------------------


def json_lines(text: str) -> list[dict[str, object]]:
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                found.append(json.loads(line))
    return found


def deliveries(text: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in DELIVERY.finditer(text)]


def hello_runs(text: str) -> list[str]:
    return [
        str(r["run_id"]) for r in json_lines(text) if str(r.get("run_id")).startswith("acme/hello@")
    ]


# What each long-running command is there to show, before the user presses Ctrl-C.
SHOWS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "schedulerstream runs tail": ("two runs of acme/hello", lambda out: len(hello_runs(out)) >= 2),
    "schedulerstream receiver": ("the receiver ready", lambda out: "receiver ready:" in out),
}


def shows(command: str) -> tuple[str, Callable[[str], bool]]:
    for prefix, expectation in SHOWS.items():
        if command.lstrip().startswith(prefix):
            return expectation
    raise AssertionError(f"README has a long-running command this test cannot check: {command!r}")


def check_finished(command: str, status: int, output: str) -> None:
    """What a command that ends must have printed."""
    assert status == 0, f"exit status {status}: {command}\n{output}"
    text = command.lstrip()
    if text.startswith("echo") and "schedulerstream schedules put" in text:
        assert "acme/hello version" in output, output
    elif text.startswith("schedulerstream cron next"):
        assert len([line for line in output.splitlines() if "2024-03-" in line]) >= 3, output
    elif text.startswith("curl") and "-X PUT" in text:
        answer = json.loads(output)
        assert "version" in answer, f"the PUT was refused: {output}"
    elif text.startswith("curl") and "/runs" in text:
        assert "items" in json.loads(output), output


# -- the test --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def end_offsets(settings: Settings, topic: str) -> dict[int, int]:
    """Where ``topic`` ends now ({} if it does not exist yet)."""
    consumer = Consumer({**base_config(settings), "group.id": f"qs-{uuid.uuid4().hex[:8]}"})
    try:
        info = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if info is None or info.error is not None:
            return {}
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in info.partitions}  # fmt: skip
    finally:
        consumer.close()


def keys_since(
    settings: Settings, topic: str, start: dict[int, int], timeout: float
) -> Iterator[str]:
    """Keys of the records of ``topic`` after ``start`` (read_committed), until idle."""
    consumer = Consumer({**base_config(settings), "group.id": f"qs-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        info = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in info.partitions])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = consumer.consume(100, timeout=0.5)
            if not batch:
                return
            for message in batch:
                if message.error() is None and message.key() is not None:
                    yield message.key().decode("utf-8", "replace")
    finally:
        consumer.close()


def venv_activation(tmp_path: Path) -> Path:
    """Where ``. .venv/bin/activate`` activates the interpreter running these tests: the
    repository itself when that is its .venv, else a directory with an equivalent script."""
    bin_dir = Path(sys.executable).parent
    if (
        REPO_ROOT / ".venv" / "bin" / "activate"
    ).exists() and bin_dir == REPO_ROOT / ".venv" / "bin":
        return REPO_ROOT
    assert (bin_dir / "schedulerstream").exists(), f"no schedulerstream script in {bin_dir}"
    home = tmp_path / "checkout"
    (home / ".venv" / "bin").mkdir(parents=True)
    (home / ".venv" / "bin" / "activate").write_text(
        f'export VIRTUAL_ENV="{bin_dir.parent}"\nexport PATH="{bin_dir}:$PATH"\n'
    )
    return home


def test_readme_quick_start_as_written(kafka_settings: Settings, tmp_path: Path) -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^dev:.*\n\t\$\(BIN\)/schedulerstream dev$", makefile, re.MULTILINE), (
        "make dev no longer runs `schedulerstream dev`: update this test"
    )
    blocks = quick_start_blocks(README.read_text())
    api_port, receiver_port = free_port(), free_port()
    # a new user's environment: no SCHEDULERSTREAM_* but where this test's stack lives
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    env.update({
        "SCHEDULERSTREAM_BOOTSTRAP_SERVERS": kafka_settings.bootstrap_servers,
        "SCHEDULERSTREAM_TOPIC_PREFIX": kafka_settings.topic_prefix,
        "SCHEDULERSTREAM_DATA_DIR": str(kafka_settings.data_dir),
        "SCHEDULERSTREAM_PARTITIONS": str(kafka_settings.partitions),
        "PYTHONUNBUFFERED": "1",
    })  # fmt: skip
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    hello_start = end_offsets(kafka_settings, "hello.out")  # shared by every run on this broker
    logs = tmp_path / "logs"
    logs.mkdir()
    dev_log = logs / "dev.log"
    with dev_log.open("w") as out:
        dev = subprocess.Popen(
            [sys.executable, "-m", "schedulerstream.cli", "dev", "--port", str(api_port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
    cwd = venv_activation(tmp_path)
    terminals: dict[str, Terminal] = {}
    running: list[Running] = []

    def dev_text() -> str:
        return dev_log.read_text(errors="replace")

    def everything() -> str:
        parts = [t.transcript() for t in terminals.values()]
        parts += [f"--- {job.command}\n{job.text()[-3000:]}" for job in running]
        return "\n".join([*parts, "--- dev ---", dev_text()[-6000:]])

    try:
        components = ("scheduler", "dispatcher", "projector", "api")
        wait_for(
            "dev's components to be ready",
            lambda: all(f"{c}: ready" in dev_text() for c in components),
            90,
            everything,
        )
        # each terminal's commands in README order; whether a Ctrl-C command is typed over
        last_of = {}
        for b, block in enumerate(blocks):
            for c, _ in enumerate(block.commands):
                last_of[block.terminal] = (b, c)
        for b, block in enumerate(blocks):
            terminal = terminals.get(block.terminal)
            if terminal is None:
                terminal = terminals[block.terminal] = Terminal(block.terminal, cwd, env, logs)
            for c, written in enumerate(block.commands):
                command = with_ports(written, api_port, receiver_port)
                if CTRL_C not in written:
                    check_finished(command, *terminal.run(command))
                    continue
                what, shown = shows(command)
                job = terminal.start(command)
                running.append(job)
                wait_for(what, lambda job=job, shown=shown: shown(job.text()), 60, everything)
                if last_of[block.terminal] != (b, c):  # the user types on: Ctrl-C first
                    assert terminal.stop(job) in (0, 1, 130), everything()
                    job.stopped = True

        # The Kafka job's runs were shown by `runs tail` (asserted above) and reached hello.out.
        text = dev_text()
        assert "dev only: webhooks may reach loopback and private addresses" in text
        assert "dev only: the Kafka topic a job's target names is created when missing" in text
        assert "created Kafka topic 'hello.out'" in text or hello_start, text[-4000:]

        def on_hello_out() -> int:
            keys = keys_since(kafka_settings, "hello.out", hello_start, 10)
            return sum(key.startswith("acme/hello@") for key in keys)

        wait_for("acme/hello's records on hello.out", lambda: on_hello_out() >= 2, 30, everything)

        # The webhooks reached the receiver, signed, on time, each run once, first attempt.
        receiver = next(job for job in running if "schedulerstream receiver" in job.command)

        def pings() -> list[dict[str, str]]:
            return [d for d in deliveries(receiver.text()) if d["run_id"].startswith("acme/ping@")]

        wait_for("two webhooks at the receiver", lambda: len(pings()) >= 2, 30, everything)
        seen = pings()
        for d in seen:
            assert d["verdict"] == "signature ok" and d["status"] == "200", (d, everything())
            assert d["attempt"] == "1", f"a retried delivery: {d}\n{everything()}"
            assert float(d["late"]) < MAX_LATENESS_S, f"late delivery: {d}\n{everything()}"
        ids = [d["run_id"] for d in seen]
        assert len(ids) == len(set(ids)), f"a run delivered twice: {ids}"

        # README's last command, typed again a little later, shows them succeeded.
        runs_command = with_ports(blocks[-1].commands[-1], api_port, receiver_port)
        last = terminals[blocks[-1].terminal]

        def succeeded() -> bool:
            status, output = last.run(runs_command)
            items = json.loads(output)["items"] if status == 0 else []
            assert all(i["status"] in ("pending", "running", "succeeded") for i in items), output
            return sum(i["status"] == "succeeded" for i in items) >= 2

        wait_for("two succeeded runs of ping in the API", succeeded, 30, everything)
        # no transaction aborted over a missing target topic (issue #10's poisoned dispatcher)
        assert "_INCONSISTENT" not in dev_text(), dev_text()[-4000:]

        for job in running:
            if not job.stopped:
                assert job.terminal.stop(job) == 0, everything()
                job.stopped = True
        assert "receiver stopped" in receiver.text()
    finally:
        for terminal in terminals.values():
            terminal.close()
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGINT)
            try:
                dev.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(dev.pid, signal.SIGKILL)
                dev.wait()
    assert dev.returncode == 0, dev_text()[-4000:]
    assert "dispatcher: stopped" in dev_text()

"""Shared pieces of the fault matrix: processes with extra environment, job loads, and the one
check every case ends with (no instant lost, one run id per instant, duplicates, lateness)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.procs import ProcessorProcess
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings
from tests.support.runs import RunsSeen, gaps, read_events, read_runs
from tests.support.waits import wait_until

SECOND = 1_000_000
CODEC = default_codec()
REPORT_ENV = "SS_FAULT_REPORT"  # a file: each case appends one JSON line with its figures


def now_us() -> int:
    return time.time_ns() // 1000


def next_second_us(offset_s: int = 1) -> int:
    return (now_us() // SECOND + offset_s) * SECOND


class FaultProcess(ProcessorProcess):
    """A processor process with extra (non-settings) environment, e.g. ``SS_FAULT_KILL_AT``,
    and an optional ``preexec`` hook; ``since_start`` counts log lines of this start only."""

    log_offset = 0

    def start(self) -> FaultProcess:
        self.log_offset = len(self.log())
        super().start()
        return self

    def this_log(self) -> str:
        return self.log()[self.log_offset :]

    def wait_running(self, partitions: int, timeout: float = 120.0) -> None:
        """Wait until this start has every one of ``partitions`` tasks running."""
        wait_until(
            lambda: self.this_log().count(" running: restored") >= partitions,
            timeout,
            f"{self.component}-{self.instance}: {partitions} tasks running",
            alive=self,
        )

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.component}-{self.instance} still running after {timeout:g}s:\n"
                f"{self.this_log()[-3000:]}"
            ) from None


def every_second_jobs(count: int, tenant: str = "load", **extra: Any) -> list[JobDefinition]:
    return [
        JobDefinition.model_validate(
            {
                "tenant": tenant,
                "job_id": f"job-{i}",
                "schedule": {"every": 1},
                "target": {"type": "kafka", "topic": "out"},
                **extra,
            }
        )
        for i in range(count)
    ]


@dataclass
class Lateness:
    """How late runs became visible: ``emitted_at - not_before`` (negative: ahead of time)."""

    values_ms: list[float] = field(default_factory=list)

    def add(self, us: int) -> None:
        self.values_ms.append(us / 1000)

    def summary(self) -> dict[str, float]:
        if not self.values_ms:
            return {"n": 0}
        ordered = sorted(self.values_ms)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return {
            "n": len(ordered),
            "median_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(p99, 1),
            "max_ms": round(ordered[-1], 1),
            "late_over_1s": sum(1 for v in ordered if v > 1000),
        }


def check_every_instant_once(
    settings: Settings,
    jobs: int,
    since_us: int,
    until_us: int,
    interval_us: int = SECOND,
    seen: RunsSeen | None = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Each job has each instant of ``[since, until]`` exactly once among the committed runs,
    under one run id per (job, instant); return the figures (runs, duplicates, lateness)."""
    seen = seen or read_runs(settings)
    triggered = [r for r in seen.triggered if tenant is None or r["tenant"] == tenant]
    ids = Counter(r["run_id"] for r in triggered)
    duplicates = {k: n for k, n in ids.items() if n > 1}
    ids_per_instant: dict[tuple[str, int], set[str]] = {}
    lateness = Lateness()
    by_job: dict[str, list[int]] = {}
    for r in triggered:
        job = f"{r['tenant']}/{r['job_id']}"
        by_job.setdefault(job, []).append(r["scheduled_at_us"])
        ids_per_instant.setdefault((job, r["scheduled_at_us"]), set()).add(r["run_id"])
        if since_us <= r["scheduled_at_us"] <= until_us:
            lateness.add(r["emitted_at_us"] - r["not_before_us"])
    figures: dict[str, Any] = {
        "runs": len(triggered),
        "duplicates": sum(n - 1 for n in duplicates.values()),
        "lateness": lateness.summary(),
    }
    assert duplicates == {}, f"duplicate committed runs {list(duplicates.items())[:5]}; {figures}"
    several = {k: v for k, v in ids_per_instant.items() if len(v) > 1}
    assert several == {}, f"several run ids for one instant: {list(several.items())[:3]}"
    assert len(by_job) == jobs, f"{len(by_job)} jobs have runs, expected {jobs}; {figures}"
    expected = (until_us - since_us) // interval_us + 1
    for key, instants in sorted(by_job.items()):
        window = sorted(t for t in instants if since_us <= t <= until_us)
        assert gaps(window, interval_us) == [], f"{key}: gaps {gaps(window, interval_us)[:3]}"
        assert len(window) == expected, (
            f"{key}: {len(window)} instants in [{since_us}, {until_us}], expected {expected} "
            f"(first {window[:1]}, last {window[-1:]}); {figures}"
        )
    return figures


def attempt_events(settings: Settings, idle_timeout: float = 2.0) -> list[dict[str, Any]]:
    """Every committed AttemptEvent, in log order per partition."""
    return [
        CODEC.decode_as("AttemptEvent", m.value())
        for m in read_events(settings, "attempts", idle_timeout)
    ]


def rejected(settings: Settings, idle_timeout: float = 2.0) -> list[dict[str, str]]:
    """The rejected records' ``rejected.*`` headers (decoded) plus key."""
    found = []
    for message in read_events(settings, "rejected", idle_timeout):
        headers = {k: (v or b"").decode("utf-8", "replace") for k, v in message.headers() or []}
        headers["key"] = (message.key() or b"").decode("utf-8", "replace")
        found.append(headers)
    return found


def report(case: str, **figures: Any) -> None:
    """Print the case's figures (``pytest -s``) and append them to ``$SS_FAULT_REPORT``."""
    line = json.dumps({"case": case, **figures}, default=str)
    print(f"\nFAULT-REPORT {line}")
    target = os.environ.get(REPORT_ENV)
    if target:
        with open(target, "a") as out:
            out.write(line + "\n")


def uncommitted_run_ids(settings: Settings, idle_timeout: float = 2.0) -> Counter[str]:
    """Every RunTriggered record on cron.runs, aborted transactions included (read_uncommitted):
    what zombies and failed transactions produced but no read_committed reader ever sees."""
    found: Counter[str] = Counter()
    messages = read_topic(settings, settings.topic("runs"), True, idle_timeout, committed=False)
    for message in messages:
        if message.value() is not None:
            name, record = CODEC.decode(message.value())
            if name == "RunTriggered":
                found[record["run_id"]] += 1
    return found


_TASK_EVENT = re.compile(r" (assigned|revoked|lost) (.*)$|task (\d+) running: restored")


def owned_partitions(log: str, topic_suffix: str) -> set[int]:
    """Partitions whose task runs at the end of ``log`` (assigned and running, not since
    revoked or lost), from the runtime's log lines; ``topic_suffix`` picks the input topic
    whose assignment counts (e.g. ``runs`` or ``schedules``)."""
    running: set[int] = set()
    for line in log.splitlines():
        match = _TASK_EVENT.search(line)
        if match is None:
            continue
        if match.group(3) is not None:
            running.add(int(match.group(3)))
            continue
        if match.group(1) == "assigned":
            continue
        for name in match.group(2).split(", "):
            topic, _, rest = name.rpartition("[")
            if topic.endswith(topic_suffix) and rest.rstrip("]").isdigit():
                running.discard(int(rest.rstrip("]")))
    return running


def log_time(line: str) -> float:
    """The wall-clock time (s since the epoch) of one processor log line."""
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def first_line_after(log: str, needle: str, after: float) -> tuple[float, str] | None:
    """The first line holding ``needle`` logged at or after wall-clock ``after``."""
    for line in log.splitlines():
        if needle in line and line[:4].isdigit() and log_time(line) >= after:
            return log_time(line), line
    return None


def child_pids(parent: int) -> list[int]:
    """The live child processes of ``parent``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry.name))
    return found


class SocketWatch:
    """Which local TCP ports a process and its children (a dispatcher's delivery process,
    ``DISPATCH_DELIVERY=process``, as they were at ``start``) hold to ``remote_port`` on
    127.0.0.1, polled every ``every`` s from /proc (fd symlinks → socket inodes →
    /proc/net/tcp): attributes the requests a receiver records (by the client's port and
    arrival time, ``sent``) to the process that sent them. A request keeps its connection at
    least as long as the receiver takes to answer, and aiohttp keeps it pooled afterwards, so
    a slow answer makes the poll miss nothing.

    A port counts only while this process held it: on loopback Linux hands a port in
    TIME_WAIT to the next connection (``tcp_tw_reuse`` 2), so another process's later
    connection may have the port this one used before."""

    def __init__(self, pid: int, remote_port: int, every: float = 0.05) -> None:
        self.pid = pid
        self.pids = [pid]
        self.remote_port = remote_port
        self.every = every
        self.ports: set[int] = set()
        self.spans: dict[int, list[list[float]]] = {}  # port → [first, last seen] while held
        self._held: set[int] = set()  # the ports of the last poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"socket-watch-{pid}", daemon=True)

    def start(self) -> SocketWatch:
        self.pids = [self.pid, *child_pids(self.pid)]
        self._thread.start()
        return self

    def stop(self) -> set[int]:
        self._stop.set()
        self._thread.join(5)
        return self.ports

    def _inodes(self) -> set[str]:
        found = set()
        for pid in self.pids:
            fd_dir = Path(f"/proc/{pid}/fd")
            try:
                names = os.listdir(fd_dir)
            except OSError:
                continue
            for name in names:
                try:
                    target = os.readlink(fd_dir / name)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    found.add(target[8:-1])
        return found

    def poll(self) -> None:
        inodes = self._inodes()
        if not inodes:
            return
        try:
            table = Path(f"/proc/{self.pid}/net/tcp").read_text().splitlines()[1:]
        except OSError:
            return
        now = time.time()
        held = set()
        for row in table:
            fields = row.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.split(":")[1], 16) == self.remote_port:
                held.add(int(local.split(":")[1], 16))
        for port in held:
            spans = self.spans.setdefault(port, [])
            if port in self._held and spans:
                spans[-1][1] = now
            else:  # (again) since the last poll
                spans.append([now, now])
        self.ports |= held
        self._held = held

    def sent(self, port: int, at: float) -> bool:
        """Did this process hold ``port`` at ``at`` (``time.time``, give or take a poll)?"""
        slack = 2 * self.every + 0.4  # a poll can come late on a busy machine
        return any(a - slack <= at <= b + slack for a, b in self.spans.get(port, ()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.every)

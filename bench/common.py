"""Shared bench plumbing: a dedicated local broker, fresh topic sets, percentiles, and the
clean-up of every process a bench started (also on failure, SIGTERM or Ctrl-C)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient

from schedulerstream.kafka import clients, topics
from schedulerstream.kafka.broker import LocalBroker, broker_answers
from schedulerstream.settings import Settings, load_settings

if TYPE_CHECKING:
    from harness.procs import ProcessorProcess

BENCH_BOOTSTRAP = "127.0.0.1:39292"
RESULTS = Path(__file__).resolve().parent / "results"


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_settings() -> Settings:
    return load_settings(bootstrap_servers=BENCH_BOOTSTRAP, data_dir=RESULTS / "broker")


def bench_broker(wipe: bool = False) -> Settings:
    """Settings for the bench broker (started here if nothing answers).

    ``wipe``: when no broker answers, start from an empty data dir (topics left by earlier runs
    make the broker start and run slower)."""
    settings = bench_settings()
    idle = not broker_answers(BENCH_BOOTSTRAP) and LocalBroker(settings).recorded_pid() is None
    if wipe and idle:
        shutil.rmtree(RESULTS / "broker", ignore_errors=True)
        shutil.rmtree(RESULTS / "state", ignore_errors=True)
    progress(LocalBroker(settings).up(timeout=180))
    return settings


def broker_pid() -> int | None:
    """The bench broker's pid: the one this data dir started, else the process listening on
    the bench port (a broker another checkout's bench started), else None."""
    recorded = LocalBroker(bench_settings()).recorded_pid()
    if recorded is not None:
        return recorded
    return listening_pid(int(BENCH_BOOTSTRAP.rsplit(":", 1)[1]))


def listening_pid(port: int) -> int | None:
    """The pid of a process with a TCP socket listening on ``port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:  # gone, or not ours to read
            continue
    return None


def fresh(
    base: Settings, partitions: int = 12, apply: bool = True, **overrides: object
) -> Settings:
    """A new topic prefix (and data dir) on the same broker, topics applied."""
    tag = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topic_prefix": f"b{tag}.",
            "partitions": partitions,
            "instance_id": f"bench-{tag}",
            "data_dir": RESULTS / "state" / tag,
            **overrides,
        }
    )
    if apply:
        topics.apply(settings)
        wait_broker_settled()
    return settings


SETTLED_CORES = 0.15  # the broker below this for one SETTLE_WINDOW_S: its topic creation done


SETTLE_WINDOW_S = 0.2


def wait_broker_settled(timeout: float = 10.0) -> float:
    """Wait until the bench broker has finished the work new topics give it (creating their
    logs takes it 1-1.5 cores for about 0.5 s after ``topics.apply`` returns, which a phase
    timed at once would share the cores with); the seconds waited. Gives up after
    ``timeout`` (the phase's own noise figures then tell)."""
    pid = broker_pid()
    started = time.monotonic()
    if pid is None:
        return 0.0
    used, at = cpu_seconds(pid), started
    while time.monotonic() - started < timeout:
        time.sleep(SETTLE_WINDOW_S)  # the sampling window of a CPU reading, not a wait for it
        now, now_used = time.monotonic(), cpu_seconds(pid)
        if (now_used - used) / (now - at) < SETTLED_CORES:
            return now - started
        used, at = now_used, now
    progress(f"WARNING the broker still took over {SETTLED_CORES} cores after {timeout:.0f} s "
             "of new topics: the next phase shares the cores with it")  # fmt: skip
    return time.monotonic() - started


def drop_topics(settings: Settings) -> None:
    """Delete every topic of ``settings.topic_prefix`` and its local state (best effort)."""
    try:
        admin = AdminClient(clients.base_config(settings))
        names = [
            n for n in admin.list_topics(timeout=10).topics if n.startswith(settings.topic_prefix)
        ]
        if names:
            for future in admin.delete_topics(names, operation_timeout=30).values():
                try:
                    future.result()
                except Exception as exc:  # clean-up only
                    progress(f"could not delete a topic: {exc}")
    except Exception as exc:  # clean-up only
        progress(f"could not delete topics of {settings.topic_prefix}: {exc}")
    shutil.rmtree(settings.data_dir, ignore_errors=True)


def free_ports(count: int) -> int:
    """A loopback port p with p + 1, ..., p + count - 1 free too."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = int(sock.getsockname()[1])
        try:
            for port in range(first + 1, first + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError(f"no {count} consecutive free ports")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def log_bytes(path: Path) -> int:
    """Bytes of a Kafka partition directory's segment files (indexes are preallocated)."""
    return sum(p.stat().st_size for p in path.glob("*.log"))


# -- process clean-up -------------------------------------------------------------------------


def children(parent: int | None = None) -> list[int]:
    """Pids of the live child processes of ``parent`` (default: this process), from /proc."""
    me = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal_tree(pid: int, sig: signal.Signals) -> None:
    """``sig`` to ``pid``'s process group when it leads one (started with a new session),
    else to ``pid`` alone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_children(keep: set[int] | None = None, timeout: float = 20.0) -> int:
    """SIGTERM every child this process started (except ``keep``), SIGKILL what is left after
    ``timeout``; returns how many there were."""
    pids = [p for p in children() if p not in (keep or set())]
    for pid in pids:
        _signal_tree(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            _signal_tree(pid, signal.SIGKILL)
    return len(pids)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_interrupt_handlers() -> None:
    """SIGINT (also when it was inherited as ignored, as by a background job of a script),
    SIGTERM and SIGHUP interrupt the bench like Ctrl-C does, so ``finally`` blocks run."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


# -- profiling --------------------------------------------------------------------------------


def start_profile(
    pid: int, seconds: float, out: Path, rate: int = 200, gil: bool = False
) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of ``pid`` for ``seconds`` into ``out`` as collapsed stacks, one root
    per thread; idle (waiting) threads are not sampled, and with ``gil`` only the thread that
    holds the GIL is. None when py-spy is not installed."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        progress("py-spy is not installed (pip install py-spy): no profile")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(round(seconds)),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--threads",
        "--output",
        str(out),
    ]
    if gil:
        command.append("--gil")
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summarize_profile(path: Path, top: int = 25) -> dict[str, object]:
    """Self and inclusive sample shares per function of a collapsed-stack file, per thread."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        threads[frames[0]] += count
        names = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0] + ")"
                 if " (" in f else f for f in frames[1:]]  # fmt: skip
        if names:
            own[names[-1]] += count
        for name in set(names):
            inclusive[name] += count

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(n, round(100 * c / total, 1)) for n, c in counter.most_common(top)]

    return {"samples": total, "threads": share(threads), "self_pct": share(own),
            "inclusive_pct": share(inclusive)}  # fmt: skip


# -- CPU accounting ---------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")  # HotSpot's compiler threads (comm: 15 chars)


def jit_seconds(pid: int) -> float:
    """CPU seconds a JVM's JIT compiler threads have used so far (0 when it is gone). Only
    live threads count: HotSpot may end an idle extra compiler thread on a larger host, so a
    difference between two readings is a lower bound (2 cores here: one C1, one C2, kept)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            if not (task / "comm").read_text().startswith(JIT_THREADS):
                continue
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def python_reference_ms(repeat: int = 7) -> float:
    """Milliseconds a fixed pure-Python workload takes, best of ``repeat``: how fast this
    machine runs Python at the moment. The same code measured 2x apart on one day here with
    nothing else running, so a run reports this beside its ratios (a slow day shows)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        table: dict[str, int] = {}
        for i in range(20_000):
            key = f"tenant-{i % 64}/job-{i}"
            table[key] = len(key) * i % 977
        total = sum(v for k, v in table.items() if k.endswith("7"))
        best = min(best, time.perf_counter() - started)
    if total < 0:  # (keeps the work from being optimized away; never true)
        raise AssertionError(total)
    return round(best * 1000, 2)


PYTHON_DRIFT = 0.2  # the reference workload's end against its start, beyond which a run warns


def python_drift_warning(at_start_ms: float, at_end_ms: float) -> str | None:
    """A warning when this machine ran Python more than ``PYTHON_DRIFT`` faster or slower at
    the end of a run than at its start: its phases were measured on different machines."""
    drift = at_end_ms / at_start_ms - 1
    if abs(drift) <= PYTHON_DRIFT:
        return None
    return (f"the Python reference workload took {at_start_ms:g} ms at the start and "
            f"{at_end_ms:g} ms at the end ({drift:+.0%}): this machine's speed changed during "
            "the run, so compare its ratios only within a phase")  # fmt: skip


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / _TICK, sum(values) / _TICK


NOISE_CORES = 0.2  # other processes above this during a measurement disturb its figures


def noise_warning(what: str, others_cores: float) -> str | None:
    """The warning (also printed to stderr) when other processes took more than NOISE_CORES
    during ``what``; None when they did not."""
    if others_cores <= NOISE_CORES:
        return None
    warning = (
        f"{what}: other processes took {others_cores:.2f} cores (> {NOISE_CORES}); "
        "its figures are disturbed"
    )
    progress(f"WARNING {warning}")
    return warning


class CpuMeter:
    """CPU cores used by named processes (and the whole machine) between ``start`` and ``stop``;
    ``stop`` warns on stderr when the rest of the machine took more than NOISE_CORES."""

    def __init__(self, pids: dict[str, int], what: str = "a measurement") -> None:
        self.pids = pids
        self.what = what
        self.elapsed = 0.0  # seconds between the last start and stop
        self.warning: str | None = None  # the last stop's noise warning
        self._start: dict[str, float] = {}
        self._machine = (0.0, 0.0)
        self._at = 0.0

    def start(self) -> CpuMeter:
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._machine = machine_busy()
        self._at = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        elapsed = self.elapsed = time.monotonic() - self._at
        used = {
            name: round((cpu_seconds(pid) - self._start[name]) / elapsed, 3)
            for name, pid in self.pids.items()
        }
        busy, total = machine_busy()
        cores = os.cpu_count() or 1
        used["machine_busy_cores"] = round(
            (busy - self._machine[0]) / max(1e-9, total - self._machine[1]) * cores, 3
        )
        used["machine_cores"] = cores
        # what the rest of the machine (other users' tests, ...) took meanwhile: noise
        ours = sum(used[name] for name in self.pids)
        used["others_cores"] = round(max(0.0, used["machine_busy_cores"] - ours), 3)
        self.warning = noise_warning(self.what, used["others_cores"])
        return used


CAUGHT_UP = re.compile(r"standby (\d+) caught up")


def owned_partitions(proc: ProcessorProcess) -> set[int]:
    """Partitions ``proc`` runs now: its last assignment's RUNNING lines minus the revoked."""
    owned: set[int] = set()
    for line in proc.log().splitlines():
        match = re.search(r"task (\d+) running: restored", line)
        if match:
            owned.add(int(match.group(1)))
        elif " revoked " in line or " lost " in line:
            owned -= {int(p) for p in re.findall(r"\[(\d+)\]", line)}
    return owned


def wait_split(pair: list[ProcessorProcess], partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a, b = (owned_partitions(p) for p in pair)
        if a and b and a | b == set(range(partitions)) and not a & b:
            caught = [set(map(int, CAUGHT_UP.findall(p.log()))) for p in pair]
            if a <= caught[1] and b <= caught[0]:  # each has a warm copy of the other's
                return
        time.sleep(0.5)
    raise RuntimeError(f"{pair[0].component}s did not split with standbys caught up")

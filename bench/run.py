"""Every bench of schedulerstream in one run, each figure next to its baseline from the same run:

    .venv/bin/python bench/run.py --quick --json     (about 23 minutes on 2 cores, broker included)
    .venv/bin/python bench/run.py --json             (full: 1M jobs, longer windows, report + plots)

Phases (``--only``/``--skip`` take their names): ``warm`` (warm_broker: rounds of a
passthrough pass, a bulk load and a dispatcher drain until the broker's JIT compiler is
quiet: a fresh broker's JIT took ~0.4 cores in the first drains), ``cron`` (bench_cron: our
next-instant vs croniter), ``http`` (bench_http: HttpSender vs a raw aiohttp loop),
``passthrough`` (bench_passthrough: raw transactional consume→produce, the fastest of three
passes), ``put``
(bench_put: ``schedules put`` in-process and as the CLI vs a raw producer writing the same
records; 20,000 jobs quick, 200,000 full),
``dispatch`` (bench_dispatch: one dispatcher,
then two processes of its group, draining pre-produced runs vs a raw aiohttp client at the same
concurrency), ``e2e`` (bench_e2e: rate search and a sustained run, scheduler + dispatcher to a
real receiver), ``burst``
(bench_e2e: one tenant's 100,000 jobs, 20,000 in quick mode, and a small tenant's 100 at one
instant), ``scheduler`` (bench_scheduler: emission rate of a burst without lead, by one process
and then by two of its group, state bytes per job, cold restore, takeover after kill -9;
100,000 jobs quick, 1,000,000 full), ``kafka_target``
(bench_kafka_target: one-shot Kafka-target jobs at one instant and at 1,000/s, ours vs a Go peer
and the same peer firing exactly once in transactions),
``failover`` (bench_failover: kill -9 of one of two schedulers, then of one of two dispatchers,
standbys on, 200 runs/s: takeover and the lateness of the runs due in the 10 s after),
``partition`` (bench_partition: one scheduler partition of 400,000 jobs, as at 50M jobs on 128
partitions; 100,000 in quick mode: state bytes, scan CPU per tick, warm, cold, standby takeover).

The broker (127.0.0.1:39292, data in bench/results/broker) is started here when nothing answers
(from an empty data dir) and stopped at the end; every process a phase started is stopped even
on failure, SIGTERM or Ctrl-C. Progress goes to stderr. The last stdout line is one JSON object
(``--json``; otherwise a readable summary comes first). The full detail (samples, steps,
profiles) goes to bench/results/run-<stamp>.json; full mode (or ``--report``) also writes
bench/results/report-<stamp>.md and PNG plots beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import (
    bench_cron,
    bench_dispatch,
    bench_e2e,
    bench_http,
    bench_kafka_target,
    bench_passthrough,
)
from bench import bench_scheduler as sched
from bench.common import (
    BENCH_BOOTSTRAP,
    RESULTS,
    bench_broker,
    bench_settings,
    broker_pid,
    drop_topics,
    fresh,
    install_interrupt_handlers,
    jit_seconds,
    progress,
    python_drift_warning,
    python_reference_ms,
    stop_children,
)
from schedulerstream.kafka.broker import LocalBroker, broker_answers
from schedulerstream.settings import Settings

PHASES = (
    "warm", "cron", "http", "passthrough", "put", "dispatch", "e2e", "burst", "scheduler",
    "kafka_target", "failover", "partition",
)  # fmt: skip
REQUIRED = (
    "scheduler_runs_per_s", "passthrough_per_s", "scheduler_vs_passthrough",
    "e2e_rate_per_s", "e2e_lateness_p50_ms", "e2e_lateness_p99_ms", "e2e_lateness_p999_ms",
    "burst_jobs", "burst_drain_s", "burst_small_tenant_p99_ms",
    "state_bytes_per_job", "restore_jobs_per_s", "takeover_s",
    "dispatch_per_s", "raw_http_per_s", "dispatch_vs_raw_http",
    "cron_next_per_s", "croniter_next_per_s", "cron_vs_croniter",
)  # fmt: skip


class Run:
    """One bench run: its options, the figures and the detail gathered by the phases."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.quick: bool = args.quick
        self.figures: dict[str, Any] = {}
        self.detail: dict[str, Any] = {}
        self.phase_s: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.jit_cores: dict[str, float] = {}  # the broker's JIT compiler during each phase
        self.stamp = time.strftime("%Y%m%dT%H%M%S")
        self.log_dir = RESULTS / "logs" / self.stamp
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.base: Settings | None = None

    # -- phases ---------------------------------------------------------------------------
    def warm(self) -> None:
        from bench import warm_broker

        assert self.base is not None
        budget = 300.0 if self.quick else 600.0
        self.figures.update(warm_broker.warm(self.base, self.log_dir, budget, 50_000, 10_000))

    def cron(self) -> None:
        self.figures.update(bench_cron.measure(2.0 if self.quick else 12.0))

    def http(self) -> None:
        found = bench_http.measure(2.0 if self.quick else 12.0)
        # its raw loop (50 workers, one static body) is not the dispatch phase's baseline
        found["target_raw_http_per_s"] = found.pop("raw_http_per_s")
        self.figures.update(found)

    def passthrough(self) -> None:
        assert self.base is not None
        records = self.args.passthrough_records or (100_000 if self.quick else 200_000)
        base, made = self.base, []

        def topics() -> Settings:
            made.append(fresh(base, apply=False))
            return made[-1]

        try:
            raw = bench_passthrough.measure_best(topics, records)
        finally:
            for settings in made:
                drop_topics(settings)
        self.figures["passthrough_per_s"] = raw["records_per_s"]
        self.figures["passthrough_passes_per_s"] = raw["passes_per_s"]
        self.figures["passthrough_baseline"] = raw["baseline"]
        self.figures["passthrough_records"] = records
        self._ratio("scheduler_vs_passthrough", "scheduler_runs_per_s", "passthrough_per_s")

    def put(self) -> None:
        from bench import bench_put

        assert self.base is not None
        self.figures.update(bench_put.measure(self.base, 20_000 if self.quick else 200_000))

    def dispatch(self) -> None:
        assert self.base is not None
        runs = self.args.dispatch_runs or (10_000 if self.quick else 50_000)
        found = bench_dispatch.measure(self.base, self.log_dir, runs, profile=self.args.profile)
        profile = found.pop("dispatch_profile", None)
        if profile is not None:
            self.detail["dispatch_profile"] = profile
        self.figures.update(found)

    def e2e(self) -> None:
        assert self.base is not None
        profile = self.args.profile or (0.0 if self.quick else 20.0)
        figures, detail = bench_e2e.rate_search(
            self.base, self.log_dir, self.quick, profile_s=profile,
            hint_per_s=self.figures.get("dispatch_per_s"),
        )  # fmt: skip
        self.figures.update(figures)
        self.detail["e2e"] = detail
        self._ratio("e2e_vs_raw_http", "e2e_rate_per_s", "raw_http_per_s")

    def burst(self) -> None:
        assert self.base is not None
        big = self.args.burst_jobs or (20_000 if self.quick else 100_000)
        figures, detail = bench_e2e.burst(self.base, self.log_dir, big, 100, big < 100_000)
        self.figures.update(figures)
        self.detail["burst"] = detail

    def scheduler(self) -> None:
        assert self.base is not None
        jobs = self.args.jobs or (100_000 if self.quick else 1_000_000)
        progress(f"scheduler: burst of {jobs} + 100 jobs without the burst lead")
        found, settings, proc = sched.burst(self.base, jobs, 100, self.log_dir, burst_lead_ms=0)
        try:
            self.figures["scheduler_runs_per_s"] = found.pop("scheduler_runs_per_s")
            self.figures.update({f"scheduler_{k}": v for k, v in found.items()})
            self._ratio("scheduler_vs_passthrough", "scheduler_runs_per_s", "passthrough_per_s")
            progress("scheduler: state size, warm restart, cold restore, takeover")
            self.figures.update(
                sched.state_and_restore(
                    settings, proc, jobs + 100, self.log_dir, RESULTS / "broker"
                )
            )
            self.figures["state_jobs"] = jobs + 100
        finally:
            if proc.alive():
                proc.stop()
            stop_children(keep=_keep())
            drop_topics(settings)
        progress("scheduler: the same burst emitted by two processes of the group")
        found, settings, proc = sched.burst(
            self.base, jobs, 100, self.log_dir, burst_lead_ms=0, processes=2
        )
        try:
            self.figures["scheduler_runs_per_s_2proc"] = found["scheduler_runs_per_s"]
            self.figures["scheduler_2proc_emit_lateness_p99_ms"] = found["emit_lateness_p99_ms"]
            self._ratio("scheduler_scaling", "scheduler_runs_per_s_2proc", "scheduler_runs_per_s")
        finally:
            proc.stop()
            stop_children(keep=_keep())
            drop_topics(settings)

    def kafka_target(self) -> None:
        assert self.base is not None
        figures, detail = bench_kafka_target.measure(
            self.base, self.log_dir, self.quick, self.args.burst_jobs
        )
        self.figures.update(figures)
        self.detail["kafka_target"] = detail

    def failover(self) -> None:
        from bench import bench_failover

        assert self.base is not None
        self.figures.update(bench_failover.measure(self.base, 200, 10.0))

    def partition(self) -> None:
        from bench import bench_partition

        assert self.base is not None
        jobs = 100_000 if self.quick else 400_000
        self.figures.update(bench_partition.measure(self.base, jobs))

    # -- plumbing -------------------------------------------------------------------------
    def _ratio(self, name: str, numerator: str, denominator: str) -> None:
        top, bottom = self.figures.get(numerator), self.figures.get(denominator)
        if top and bottom:
            self.figures[name] = round(top / bottom, 3)

    def run_phase(self, name: str, body: Callable[[], None]) -> None:
        progress(f"== {name}")
        started = time.monotonic()
        broker = broker_pid()
        jit_at = jit_seconds(broker) if broker is not None else 0.0
        try:
            body()
        except KeyboardInterrupt:
            self.errors[name] = "interrupted"
            raise
        except Exception as exc:
            self.errors[name] = f"{type(exc).__name__}: {str(exc)[:500]}"
            progress(f"{name} failed:\n{traceback.format_exc()}")
            stop_children(keep=_keep())
        finally:
            elapsed = time.monotonic() - started
            self.phase_s[name] = round(elapsed, 1)
            if broker is not None:
                used = max(0.0, jit_seconds(broker) - jit_at)  # 0: the broker died meanwhile
                self.jit_cores[name] = round(used / max(0.1, elapsed), 3)
            progress(f"== {name} took {self.phase_s[name]:.0f} s")


def _keep() -> set[int]:
    """Children that survive a phase's clean-up: the broker."""
    pid = broker_pid()
    return {pid} if pid is not None else set()


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False,
            cwd=Path(__file__).resolve().parents[1],
        ).stdout.rstrip()  # fmt: skip
    except OSError:
        return "?"


def _code_under_test() -> dict[str, Any]:
    """The commit, and the package files that differ from it (a shared checkout may hold
    someone's uncommitted work: the processes run what is on disk)."""
    changed = _git("status", "--porcelain", "--", "schedulerstream").splitlines()
    return {"commit": _git("rev-parse", "--short", "HEAD").strip(),
            "uncommitted": [line[3:] for line in changed]}  # fmt: skip


def _machine(python_ref_ms_at_start: float, load_at_start: tuple[float, ...]) -> dict[str, Any]:
    at_end = python_reference_ms()
    found: dict[str, Any] = {
        "cores": os.cpu_count(),
        "load_avg_at_start": [round(x, 2) for x in load_at_start],
        "python": platform.python_version(),
        "platform": platform.platform(),
        # a fixed Python workload's ms at the start and the end (bench/common.py): compare
        # days by it before comparing their figures
        "python_ref_ms": [python_ref_ms_at_start, at_end],
    }
    warning = python_drift_warning(python_ref_ms_at_start, at_end)
    if warning is not None:
        found["warning"] = warning
        progress(f"WARNING: {warning}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short run (about 23 minutes)")
    parser.add_argument("--json", action="store_true", help="only JSON on stdout (last line)")
    parser.add_argument("--only", default="", help=f"comma-separated phases of {PHASES}")
    parser.add_argument("--skip", default="", help="comma-separated phases to leave out")
    parser.add_argument("--report", action="store_true", help="Markdown report and plots")
    parser.add_argument("--keep-broker", action="store_true", help="leave the broker running")
    parser.add_argument(
        "--profile", type=float, default=0.0, help="py-spy seconds (dispatch, e2e; full: 20 s)"
    )
    parser.add_argument("--jobs", type=int, default=0, help="scheduler phase jobs")
    parser.add_argument("--burst-jobs", type=int, default=0)
    parser.add_argument("--dispatch-runs", type=int, default=0)
    parser.add_argument("--passthrough-records", type=int, default=0)
    args = parser.parse_args()
    chosen = [p for p in (args.only.split(",") if args.only else PHASES) if p]
    chosen = [p for p in chosen if p not in args.skip.split(",")]
    unknown = set(chosen) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)} (known: {', '.join(PHASES)})")
    install_interrupt_handlers()
    load_at_start = os.getloadavg()
    python_ref_ms = python_reference_ms()
    run = Run(args)
    started = time.monotonic()
    ours = not broker_answers(BENCH_BOOTSTRAP)
    run.figures["mode"] = "quick" if args.quick else "full"
    code = _code_under_test()
    progress(f"bench run {run.stamp} ({run.figures['mode']}): {', '.join(chosen)}")
    interrupted = False
    try:
        run.base = bench_broker(wipe=ours)
        for phase in PHASES:
            if phase in chosen:
                run.run_phase(phase, getattr(run, phase))
    except KeyboardInterrupt:
        interrupted = True
        progress("interrupted: stopping every process of this run")
    except Exception as exc:
        run.errors["setup"] = f"{type(exc).__name__}: {exc}"
        progress(f"set-up failed:\n{traceback.format_exc()}")
    finally:
        stopped = stop_children(keep=_keep())
        if stopped:
            progress(f"stopped {stopped} leftover process(es)")
        if ours and not args.keep_broker:
            progress(LocalBroker(bench_settings()).down())
    run.figures["bench_wall_s"] = round(time.monotonic() - started, 1)
    run.figures["phase_s"] = run.phase_s
    run.figures["phase_broker_jit_cores"] = run.jit_cores
    run.figures["commit"] = code["commit"]
    if code["uncommitted"]:
        run.figures["uncommitted_package_files"] = code["uncommitted"]
    run.figures["machine"] = _machine(python_ref_ms, load_at_start)
    missing = [k for k in REQUIRED if run.figures.get(k) is None]
    if missing:
        run.figures["missing_keys"] = missing
    if run.errors:
        run.figures["errors"] = run.errors
    RESULTS.mkdir(parents=True, exist_ok=True)
    detail_path = RESULTS / f"run-{run.stamp}.json"
    detail_path.write_text(json.dumps({"figures": run.figures, "detail": run.detail}))
    progress(f"detail in {detail_path}")
    if (args.report or not args.quick) and not interrupted:
        try:
            from bench import report

            progress(f"report in {report.write(run.figures, run.detail, run.stamp, sys.argv)}")
        except Exception:
            progress(f"the report failed:\n{traceback.format_exc()}")
    if not args.json:
        for key, value in run.figures.items():
            if not isinstance(value, dict | list):
                print(f"{key:36} {value}")
    print(json.dumps(run.figures))
    return 1 if run.errors or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())

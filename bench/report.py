"""The Markdown report and PNG plots of a bench run (bench/run.py), in bench/results/.

Plots need matplotlib (``pip install -e '.[bench]'``); without it the report is written alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import RESULTS, percentile

SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Scheduler vs raw transactional passthrough", [
        ("scheduler_runs_per_s", "scheduler: runs/s (burst, no lead, read_committed)"),
        ("passthrough_per_s", "raw consume→produce transactions: records/s"),
        ("scheduler_vs_passthrough", "ratio"),
        ("scheduler_emit_lateness_p99_ms", "scheduler-only burst: p99 lateness at cron.runs (ms)"),
    ]),
    ("End to end (scheduled instant → receiver clock)", [
        ("e2e_rate_per_s", "sustained rate (runs/s)"),
        ("e2e_sustained_s", "window (s)"),
        ("e2e_lateness_p50_ms", "p50 (ms)"),
        ("e2e_lateness_p99_ms", "p99 (ms)"),
        ("e2e_lateness_p999_ms", "p99.9 (ms)"),
        ("e2e_lateness_max_ms", "max (ms)"),
        ("e2e_missing", "runs never delivered in the window"),
        ("e2e_jobs", "jobs"),
    ]),
    ("Burst: one big tenant and a small one at one instant", [
        ("burst_jobs", "big tenant's jobs"),
        ("burst_quick_scaled", "scaled down (quick mode)"),
        ("burst_drain_s", "drain: last big-tenant arrival − instant (s)"),
        ("burst_delivered_per_s", "big tenant delivered per second"),
        ("burst_small_tenant_p50_ms", "small tenant p50 (ms)"),
        ("burst_small_tenant_p99_ms", "small tenant p99 (ms)"),
    ]),
    ("State, restore, takeover", [
        ("state_jobs", "jobs"),
        ("state_bytes_per_job", "bytes per job (RocksDB + changelog segments)"),
        ("restore_jobs_per_s", "cold restore from the changelog: jobs/s"),
        ("warm_restart_s", "warm restart (s)"),
        ("takeover_s", "takeover after kill -9 (s)"),
        ("takeover_session_timeout_ms", "session timeout (ms)"),
    ]),
    ("Dispatcher vs raw HTTP client", [
        ("dispatch_per_s", "dispatcher: runs/s to the receiver"),
        ("raw_http_per_s", "raw aiohttp client, same concurrency: requests/s"),
        ("dispatch_vs_raw_http", "ratio"),
        ("dispatch_cpu_us_per_run", "dispatcher CPU µs per run"),
        ("raw_http_cpu_us_per_request", "raw client CPU µs per request"),
        ("target_http_per_s", "HttpSender.deliver alone: deliveries/s"),
        ("target_vs_raw_http", "HttpSender vs raw loop"),
    ]),
    ("Cron engine", [
        ("cron_next_per_s", "next instant/s (ours)"),
        ("croniter_next_per_s", "croniter next/s"),
        ("cron_vs_croniter", "ratio"),
    ]),
]  # fmt: skip


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _plots(detail: dict[str, Any], stamp: str) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    samples = detail.get("e2e", {}).get("samples") or []
    if samples:
        fig, (over, dist) = plt.subplots(1, 2, figsize=(12, 4.5))
        xs = [s for s, _ in samples]
        ys = [late for _, late in samples]
        over.scatter(xs, ys, s=2, alpha=0.3, label="one run")
        seconds = sorted({int(x) for x in xs})
        by_second: dict[int, list[float]] = {s: [] for s in seconds}
        for x, y in samples:
            by_second[int(x)].append(y)
        over.plot(seconds, [percentile(by_second[s], 50) for s in seconds], label="p50 per second")
        over.plot(seconds, [percentile(by_second[s], 99) for s in seconds], label="p99 per second")
        over.axhline(1000, color="red", linestyle="--", linewidth=1, label="1 s")
        over.set_xlabel("scheduled instant (s into the sustained window)")
        over.set_ylabel("lateness at the receiver (ms)")
        over.set_title("End-to-end lateness over time")
        over.legend(loc="upper right", fontsize=8)
        dist.hist(ys, bins=100)
        dist.set_yscale("log")
        dist.set_xlabel("lateness (ms)")
        dist.set_ylabel("runs")
        dist.set_title("Lateness distribution")
        fig.tight_layout()
        path = RESULTS / f"e2e-lateness-{stamp}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    steps = detail.get("e2e", {}).get("steps") or []
    if steps:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, step in enumerate(steps):
            p99 = step["p99_ms"] if step["p99_ms"] is not None else 10_000
            color = "tab:green" if step["ok"] else "tab:red"
            marker = "s" if step.get("kind") == "sustained" else "o"
            ax.scatter([step["rate_per_s"]], [p99], color=color, marker=marker)
            ax.annotate(str(i + 1), (step["rate_per_s"], p99), fontsize=8)
        ax.axhline(1000, color="red", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlabel("runs/s")
        ax.set_ylabel("p99 lateness (ms)")
        ax.set_title("Rate search (order of the steps; square: sustained)")
        fig.tight_layout()
        path = RESULTS / f"e2e-steps-{stamp}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    by_tenant = detail.get("burst", {}).get("by_tenant") or {}
    if by_tenant:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for tenant, late in sorted(by_tenant.items()):
            ordered = sorted(late)
            fraction = [(i + 1) / len(ordered) for i in range(len(ordered))]
            label = f"{tenant} ({len(ordered):,} runs)"
            ax.plot([v / 1000 for v in ordered], fraction, label=label)
        ax.set_xlabel("seconds after the instant")
        ax.set_ylabel("fraction of the tenant's runs delivered")
        ax.set_title("Burst drain per tenant")
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = RESULTS / f"burst-drain-{stamp}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def _profile_lines(name: str, profile: dict[str, Any], top: int = 12) -> list[str]:
    lines = [f"**{name}** ({profile['samples']} samples; threads: "
             + ", ".join(f"{t} {p}%" for t, p in profile["threads"]) + ")", "",
             "| self % | function |", "|---:|---|"]  # fmt: skip
    lines += [f"| {pct} | `{fn}` |" for fn, pct in profile["self_pct"][:top]]
    return [*lines, ""]


def write(figures: dict[str, Any], detail: dict[str, Any], stamp: str, argv: list[str]) -> Path:
    plots = _plots(detail, stamp)
    command = " ".join(["python", *argv])
    lines = [
        f"# schedulerstream bench {stamp} ({figures.get('mode')})",
        "",
        f"Command: `{command}` at commit `{figures.get('commit')}`; machine: "
        f"{json.dumps(figures.get('machine'))}; wall {figures.get('bench_wall_s')} s; "
        f"phases {json.dumps(figures.get('phase_s'))}.",
        "",
    ]
    if figures.get("errors"):
        lines += ["**Errors:** `" + json.dumps(figures["errors"]) + "`", ""]
    for title, rows in SECTIONS:
        lines += [f"## {title}", "", "| figure | value | key |", "|---|---:|---|"]
        lines += [f"| {label} | {_fmt(figures.get(key))} | `{key}` |" for key, label in rows]
        lines.append("")
    steps = figures.get("e2e_rate_steps") or []
    if steps:
        lines += ["## Rate steps tried", "", "| # | runs/s | runs | p99 (ms) | missing | verdict |",
                  "|---:|---:|---:|---:|---:|---|"]  # fmt: skip
        for i, s in enumerate(steps):
            verdict = ("sustained " if s.get("sustained") else "") + ("ok" if s["ok"] else "late")
            lines.append(f"| {i + 1} | {s['rate_per_s']} | {s['runs']} | {s['p99_ms']} | "
                         f"{s['missing']} | {verdict} |")  # fmt: skip
        lines.append("")
    cpu = figures.get("e2e_cpu_cores")
    if cpu:
        lines += ["## CPU during the sustained window (cores)", "",
                  "| process | cores |", "|---|---:|"]  # fmt: skip
        lines += [f"| {k} | {v} |" for k, v in cpu.items()]
        lines.append("")
    profiles = dict(detail.get("e2e", {}).get("profiles") or {})
    if detail.get("dispatch_profile"):
        profiles["dispatcher (backlog drain)"] = detail["dispatch_profile"]
    if profiles:
        lines += ["## Profiles (py-spy, non-idle samples)", ""]
        for name, profile in profiles.items():
            lines += _profile_lines(name, profile)
    for path in plots:
        lines += [f"![{path.stem}]({path.name})", ""]
    if not plots:
        lines += ["(no plots: matplotlib is not installed; `pip install -e '.[bench]'`)", ""]
    scalars = {k: v for k, v in figures.items() if not isinstance(v, dict | list)}
    lines += ["## Every scalar figure", "", "```json", json.dumps(scalars, indent=1), "```", ""]
    path = RESULTS / f"report-{stamp}.md"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    """Re-write the report of a stored run: ``python bench/report.py bench/results/run-X.json``."""
    source = Path(sys.argv[1])
    data = json.loads(source.read_text())
    stamp = source.stem.removeprefix("run-")
    print(write(data["figures"], data["detail"], stamp, ["bench/run.py", "(stored)"]))


if __name__ == "__main__":
    main()

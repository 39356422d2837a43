"""``schedulerstream topics apply|describe``: create and verify the declared topics."""

from __future__ import annotations

import sys

import click

from schedulerstream.contracts.work_pools import CAP_VARIABLE
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka import topics as topology
from schedulerstream.settings import get_settings


def _duration(ms: int | None) -> str:
    """Milliseconds as a short human duration ("7d", "36h", "forever")."""
    if ms is None:
        return "-"
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _declared_vs_actual(declared: str, actual: str | None) -> str:
    if actual is None or actual == declared:
        return declared
    return f"{declared} (is {actual})"


@click.group()
def topics() -> None:
    """Create and verify the topics declared in topologies/topics.toml."""


@topics.command()
@click.option("--timeout", default=30.0, show_default=True, help="Seconds per admin operation.")
def apply(timeout: float) -> None:
    """Create missing topics; verify and align existing ones.

    Refuses (exit 1, nothing changed) when co-partitioning or compaction would be broken.
    """
    try:
        lines = topology.apply(get_settings(), timeout=timeout)
    except SchedulerStreamError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    for line in lines:
        click.echo(line)


@topics.command()
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per admin operation.")
@click.option("--check", is_flag=True, help="Exit 1 when a topic is missing or mismatched.")
def describe(timeout: float, check: bool) -> None:
    """Print the declared layout next to the cluster's.

    A value that differs on the cluster is shown as "declared (is actual)". A note says when
    the worker pools' topics reached SCHEDULERSTREAM_MAX_WORK_POOLS.
    """
    settings = get_settings()
    try:
        rows = topology.describe(settings, timeout=timeout)
    except SchedulerStreamError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    table = [("TOPIC", "PARTITIONS", "CLEANUP", "RETENTION", "CO-PARTITIONED", "STATUS")]
    for row in rows:
        actual_partitions = None if row.actual_partitions is None else str(row.actual_partitions)
        actual_retention = (
            None if row.actual_partitions is None else _duration(row.actual_retention_ms)
        )
        table.append(
            (
                row.name,
                _declared_vs_actual(str(row.partitions), actual_partitions),
                _declared_vs_actual(row.cleanup, row.actual_cleanup),
                _declared_vs_actual(_duration(row.retention_ms), actual_retention),
                "yes" if row.co_partitioned else "no",
                row.status,
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(len(table[0]))]
    for cells in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    problems = [p for row in rows for p in row.problems]
    for problem in problems:
        click.echo(f"problem: {problem}", err=True)
    work = settings.topics.work_prefix
    pools = sum(1 for row in rows if row.name.startswith(work) and row.status != "missing")
    if pools >= settings.max_work_pools:  # not a problem: existing pools work, new ones wait
        click.echo(f"note: {pools} worker pools' topics, {CAP_VARIABLE}="
                   f"{settings.max_work_pools}: dispatchers make none for a new pool",
                   err=True)  # fmt: skip
    if check and (problems or any(row.status == "missing" for row in rows)):
        sys.exit(1)

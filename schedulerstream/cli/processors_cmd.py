"""``schedulerstream scheduler`` and ``dispatcher`` (and the projector's command): run one
processor, with its /metrics endpoint when ``SCHEDULERSTREAM_METRICS_PORT`` is set; with
``--processes N`` (N > 1), N members of its group under one supervisor."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import click

from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.gc_policy import tune_gc
from schedulerstream.kafka.access import check_access
from schedulerstream.kafka.topics import wait_for_topics
from schedulerstream.logs import configure_logging
from schedulerstream.observability.exporter import serve
from schedulerstream.runtime import Processor, install_signal_handlers
from schedulerstream.runtime.topology import Topology
from schedulerstream.scheduler.topology import SchedulerTopology
from schedulerstream.settings import Settings, load_settings
from schedulerstream.supervisor import Supervisor, members

log = logging.getLogger("schedulerstream")


def processes_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--processes`` option of a processor command."""
    return click.option(
        "--processes",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Members of the group to run here, as child processes of one supervisor that "
        "restarts a crashed one (member k: instance id INSTANCE_ID-k, data dir "
        "DATA_DIR/NAME-k, metrics port METRICS_PORT+k-1). 1: this process is the processor.",
    )(command)


def supervise(name: str, args: list[str], processes: int) -> None:
    """Run ``processes`` members of ``name``'s group until SIGTERM/SIGINT; exit 0 when every
    member stopped cleanly."""
    try:
        settings = load_settings()  # a bad setting fails here, once, not in a restart loop
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc

    def say(line: str) -> None:
        click.echo(f"schedulerstream {name} | {line}", err=True)

    if name == "projector" and not settings.database_url:
        raise click.ClickException(
            "projector --processes > 1 needs PostgreSQL (SCHEDULERSTREAM_DATABASE_URL): the "
            "SQLite read model is one file with one writer"
        )
    group = members(name, args, processes, settings)
    say(f"{processes} members: instance ids {settings.instance_id}-1 to -{processes}, "
        f"data dirs {settings.data_dir}/{name}-1 to -{processes}")  # fmt: skip
    raise SystemExit(Supervisor(group, say).run())


def run_processor(settings: Settings, topology: Topology) -> None:
    """Run ``topology`` until SIGTERM/SIGINT; the open transaction is committed first."""
    wait_for_topics(settings, [*topology.input_topics, topology.changelog_topic])
    tune_gc(settings.gc_young_threshold)
    processor = Processor(settings, topology)
    install_signal_handlers(processor)
    exporter = serve(settings, processor)  # /metrics when SCHEDULERSTREAM_METRICS_PORT is set
    log.info(
        "processor=%s instance=%s group=%s ready",
        topology.name, settings.instance_id, processor.group_id,
    )  # fmt: skip
    try:
        processor.run()
    finally:
        if exporter is not None:
            exporter.close()
    log.info("processor=%s instance=%s stopped", topology.name, settings.instance_id)


@click.command()
@processes_option
def scheduler(processes: int) -> None:
    """Run one scheduler instance (identity from SCHEDULERSTREAM_INSTANCE_ID)."""
    if processes > 1:
        supervise("scheduler", ["scheduler"], processes)
    configure_logging("scheduler")
    settings = load_settings()
    try:
        check_access(settings, "scheduler")  # it may log in and has its ACLs (kafka/access.py)
        run_processor(settings, SchedulerTopology(settings))
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command()
@processes_option
def dispatcher(processes: int) -> None:
    """Run one dispatcher instance (identity from SCHEDULERSTREAM_INSTANCE_ID)."""
    if processes > 1:
        supervise("dispatcher", ["dispatcher"], processes)
    configure_logging("dispatcher")
    settings = load_settings()
    try:
        check_access(settings, "dispatcher")  # it may log in and has its ACLs (kafka/access.py)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    topology = DispatcherTopology(settings)
    try:
        run_processor(settings, topology)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        topology.close()

"""``schedulerstream scheduler`` and ``dispatcher`` (and the projector's command): run one
processor, with its /metrics endpoint when ``SCHEDULERSTREAM_METRICS_PORT`` is set."""

from __future__ import annotations

import logging

import click

from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka.access import check_access
from schedulerstream.kafka.topics import wait_for_topics
from schedulerstream.logs import configure_logging
from schedulerstream.observability.exporter import serve
from schedulerstream.runtime import Processor, install_signal_handlers
from schedulerstream.runtime.topology import Topology
from schedulerstream.scheduler.topology import SchedulerTopology
from schedulerstream.settings import Settings, load_settings

log = logging.getLogger("schedulerstream")


def run_processor(settings: Settings, topology: Topology) -> None:
    """Run ``topology`` until SIGTERM/SIGINT; the open transaction is committed first."""
    wait_for_topics(settings, [*topology.input_topics, topology.changelog_topic])
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
def scheduler() -> None:
    """Run one scheduler instance (identity from SCHEDULERSTREAM_INSTANCE_ID)."""
    configure_logging("scheduler")
    settings = load_settings()
    try:
        check_access(settings, "scheduler")  # it may log in and has its ACLs (kafka/access.py)
        run_processor(settings, SchedulerTopology(settings))
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command()
def dispatcher() -> None:
    """Run one dispatcher instance (identity from SCHEDULERSTREAM_INSTANCE_ID)."""
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

"""The ``schedulerstream`` command line: one click group, one module per command family."""

from __future__ import annotations

from typing import Any

import click

from schedulerstream.cli import (
    api_cmd,
    connect_cmd,
    cron_cmd,
    dev_cmd,
    jobs_cmd,
    kafka_cmd,
    processors_cmd,
    projector_cmd,
    runs_cmd,
    schedules_cmd,
    tenants_cmd,
    topics_cmd,
    worker_cmd,
)
from schedulerstream.errors import SchedulerStreamError


class _Group(click.Group):
    """Turns settings and broker errors of any command into a clear one-line error."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerStreamError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
@click.version_option(package_name="schedulerstream")
def main() -> None:
    """schedulerstream: a distributed cron scheduler on Apache Kafka."""


main.add_command(cron_cmd.cron)
main.add_command(kafka_cmd.kafka)
main.add_command(connect_cmd.connect)
main.add_command(topics_cmd.topics)
main.add_command(schedules_cmd.schedules)
main.add_command(runs_cmd.runs)
main.add_command(processors_cmd.scheduler)
main.add_command(processors_cmd.dispatcher)
main.add_command(projector_cmd.projector)
main.add_command(dev_cmd.dev)
main.add_command(api_cmd.api)
main.add_command(tenants_cmd.tenants)
main.add_command(jobs_cmd.jobs)
main.add_command(jobs_cmd.backfill)
main.add_command(worker_cmd.worker)

"""The ``schedulerstream`` command line: one click group, one module per command family."""

from __future__ import annotations

import click

from schedulerstream.cli import (
    cron_cmd,
    dev_cmd,
    kafka_cmd,
    processors_cmd,
    runs_cmd,
    schedules_cmd,
    topics_cmd,
)


@click.group()
@click.version_option(package_name="schedulerstream")
def main() -> None:
    """schedulerstream: a distributed cron scheduler on Apache Kafka."""


main.add_command(cron_cmd.cron)
main.add_command(kafka_cmd.kafka)
main.add_command(topics_cmd.topics)
main.add_command(schedules_cmd.schedules)
main.add_command(runs_cmd.runs)
main.add_command(processors_cmd.scheduler)
main.add_command(dev_cmd.dev)

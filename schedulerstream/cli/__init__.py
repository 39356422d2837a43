"""The ``schedulerstream`` command line: one click group, one module per command family."""

from __future__ import annotations

import click

from schedulerstream.cli import cron_cmd, kafka_cmd


@click.group()
@click.version_option(package_name="schedulerstream")
def main() -> None:
    """schedulerstream: a distributed cron scheduler on Apache Kafka."""


main.add_command(cron_cmd.cron)
main.add_command(kafka_cmd.kafka)


if __name__ == "__main__":
    main()

"""``schedulerstream dev``: the whole scheduler on one machine, broker included."""

from __future__ import annotations

import click

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka import topics
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import load_settings
from schedulerstream.supervisor import Component, Supervisor


def say(line: str) -> None:
    click.secho(f"schedulerstream dev | {line}", fg="green", err=True)


@click.command()
@click.option("--keep-broker", is_flag=True, help="Leave the broker running on exit.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of the REST API.")  # fmt: skip
def dev(keep_broker: bool, port: int) -> None:
    """Run broker, topics and every processor, supervised; Ctrl-C stops it all cleanly."""
    settings = load_settings()
    broker = LocalBroker(settings)
    try:
        started_broker = not broker.answers()
        say(f"kafka: {broker.up()}")
        for line in topics.apply(settings):
            click.echo(f"  {line}", err=True)
        say(f"topics: ready (prefix {settings.topic_prefix!r}, {settings.partitions} partitions)")
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    components = [
        Component("scheduler", ["scheduler"]),
        Component("dispatcher", ["dispatcher"]),
        Component("projector", ["projector"]),
        Component("api", ["api", "--port", str(port)]),
    ]
    Supervisor(components, say).run()
    if started_broker and not keep_broker:
        say(f"kafka: {broker.down()}")

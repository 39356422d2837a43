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


def processor_metrics(first: int) -> dict[str, dict[str, str]]:
    """The environment giving each processor its own metrics port (``first`` and the next
    two), or none (0) when ``first`` is 0."""
    names = ("scheduler", "dispatcher", "projector")
    return {
        name: {"SCHEDULERSTREAM_METRICS_PORT": str(first + i if first else 0)}
        for i, name in enumerate(names)
    }


@click.command()
@click.option("--keep-broker", is_flag=True, help="Leave the broker running on exit.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of the REST API.")  # fmt: skip
@click.option("--metrics-port", type=click.IntRange(0, 65533), default=None,
              help="First of three /metrics ports: scheduler, dispatcher, projector "
                   "(default SCHEDULERSTREAM_METRICS_PORT; 0: none).")  # fmt: skip
def dev(keep_broker: bool, port: int, metrics_port: int | None) -> None:
    """Run broker, topics and every processor, supervised; Ctrl-C stops it all cleanly."""
    settings = load_settings()
    metrics = processor_metrics(settings.metrics_port if metrics_port is None else metrics_port)
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
        Component("scheduler", ["scheduler"], metrics["scheduler"]),
        Component("dispatcher", ["dispatcher"], metrics["dispatcher"]),
        Component("projector", ["projector"], metrics["projector"]),
        Component("api", ["api", "--port", str(port)]),
    ]
    if metrics["scheduler"]["SCHEDULERSTREAM_METRICS_PORT"] != "0":
        ports = ", ".join(f"{n} :{e['SCHEDULERSTREAM_METRICS_PORT']}" for n, e in metrics.items())
        say(f"metrics: {ports} (/metrics; the API's is on its own port)")
    Supervisor(components, say).run()
    if started_broker and not keep_broker:
        say(f"kafka: {broker.down()}")

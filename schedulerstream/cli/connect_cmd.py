"""``schedulerstream connect up|down|status``: a Kafka Connect worker and the sinks of
``topologies/connect/``."""

from __future__ import annotations

import sys

import click

from schedulerstream.errors import ConnectError
from schedulerstream.kafka.access import check_access
from schedulerstream.kafka.connect import (
    DEFAULT_PORT,
    ConnectClient,
    LocalConnect,
    apply_connectors,
    connector_files,
    connector_variables,
    load_connector,
)
from schedulerstream.settings import get_settings

PORT = click.option(
    "--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
    help="REST port of the local worker (127.0.0.1).",
)  # fmt: skip
URL = click.option("--url", help="A running Connect cluster's REST URL (no local worker).")


def _client(url: str | None, port: int) -> ConnectClient:
    return ConnectClient(url) if url else LocalConnect(get_settings(), port).client


@click.group()
def connect() -> None:
    """A Kafka Connect worker (jars from Maven Central) with the sinks of topologies/connect/."""


@connect.command()
@click.argument("names", nargs=-1)
@PORT
@URL
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="Value of a ${NAME} placeholder of the configs (repeatable).")  # fmt: skip
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for each step.")
def up(names: tuple[str, ...], port: int, url: str | None, assignments: tuple[str, ...],
       timeout: float) -> None:  # fmt: skip
    """Start the worker (unless --url) and create or update the connectors NAMES (file stems
    in topologies/connect/; default all), then wait until they run. A local worker's principal
    is checked first: a missing ACL or a failed login stops it at once, naming what is wrong."""
    settings = get_settings()
    overrides = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--set")
        overrides[name] = value
    variables = connector_variables(settings, **overrides)
    bodies = [load_connector(path, variables) for path in connector_files(names)]
    if url:
        client = ConnectClient(url)
        if not client.answers():
            raise ConnectError(f"no Connect worker answers at {url}")
    else:
        check_access(settings, "connect")  # its principal may log in and has its ACLs
        local = LocalConnect(settings, port)
        click.echo(local.up(timeout=timeout), err=True)
        client = local.client
    for line in apply_connectors(client, bodies, timeout=timeout):
        click.echo(f"  {line}", err=True)
    click.echo(client.url)


@connect.command()
@PORT
@click.option("--kill", is_flag=True, help="SIGKILL instead of a clean shutdown.")
def down(port: int, kill: bool) -> None:
    """Stop the worker this data dir started (connectors stay configured in Kafka)."""
    click.echo(LocalConnect(get_settings(), port).down(kill=kill))


@connect.command()
@PORT
@URL
def status(port: int, url: str | None) -> None:
    """Each connector's state; exit 1 when the worker is down or a connector or task failed."""
    client = _client(url, port)
    if not client.answers():
        click.echo(f"down: no Connect worker answers at {client.url}")
        sys.exit(1)
    failed = False
    statuses = client.statuses()
    for name, state in sorted(statuses.items()):
        tasks = [t["state"] for t in state.get("tasks", [])]
        failed |= "FAILED" in [state["connector"]["state"], *tasks]
        click.echo(f"{name}: {state['connector']['state']}, tasks {', '.join(tasks) or 'none'}")
    click.echo(f"up: {client.url} ({len(statuses)} connector(s))")
    sys.exit(1 if failed else 0)

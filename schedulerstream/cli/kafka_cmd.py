"""``schedulerstream kafka up|down|status``: the local development broker."""

from __future__ import annotations

import sys

import click

from schedulerstream.errors import BrokerError
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import get_settings


@click.group()
def kafka() -> None:
    """Run a local single-node KRaft broker (jars from Maven Central)."""


@kafka.command()
@click.option("--timeout", default=90.0, show_default=True, help="Seconds to wait for it.")
@click.option(
    "--secure",
    is_flag=True,
    help="SASL_SSL (SCRAM-SHA-512, a local CA) with ACLs; prints the admin's client "
    "properties file instead of the address.",
)
def up(timeout: float, secure: bool) -> None:
    """Start the broker (or use the one already answering) and print its address."""
    broker = LocalBroker(get_settings(), secure=secure)
    try:
        click.echo(broker.up(timeout=timeout), err=True)
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc
    if not broker.secure:
        click.echo(get_settings().bootstrap_servers)
        return
    clients = broker.admin_properties().parent
    click.echo(
        f"SASL_SSL, SCRAM-SHA-512, ACLs on. Admin (super user) client properties below; "
        f"one file per component user in {clients}/. Use: "
        "SCHEDULERSTREAM_KAFKA_CONFIG_FILE=<file>",
        err=True,
    )
    click.echo(str(broker.admin_properties()))


@kafka.command()
@click.option("--kill", is_flag=True, help="SIGKILL instead of a clean shutdown.")
def down(kill: bool) -> None:
    """Stop the broker this data dir started."""
    click.echo(LocalBroker(get_settings()).down(kill=kill))


@kafka.command()
def status() -> None:
    """Exit 0 when a broker answers at the bootstrap address, 1 otherwise."""
    settings = get_settings()
    broker = LocalBroker(settings)
    if broker.answers():
        pid = broker.recorded_pid()
        owner = f"started here, pid {pid}" if pid else "not started by this data dir"
        click.echo(f"up: {settings.bootstrap_servers} ({owner})")
        sys.exit(0)
    click.echo(f"down: nothing answers at {settings.bootstrap_servers}")
    sys.exit(1)

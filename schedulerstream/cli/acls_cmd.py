"""``schedulerstream acls plan|apply``: the minimal ACLs of each component (kafka/acls.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from schedulerstream.kafka import acls
from schedulerstream.settings import load_settings


@click.group("acls")
def acls_group() -> None:
    """The minimal Kafka ACLs of each component: plan prints them, apply creates them."""


def _options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option(
                "--component", "components", multiple=True, type=click.Choice(acls.COMPONENTS),
                help="Only these components (repeatable; default: all).",
            ),
            click.option(
                "--principal", "principals", multiple=True, metavar="COMPONENT=TYPE:NAME",
                help="A component's principal (repeatable; default User:<component>, the users "
                "of `kafka up --secure`).",
            ),
            click.option(
                "--pool", "pools", multiple=True,
                help="Worker pools (repeatable; default: every pool, by the work. prefix).",
            ),
            click.option(
                "--target-topic", "target_topics", multiple=True, metavar="TOPIC[*]",
                help="A Kafka target topic the dispatcher writes (repeatable; TOPIC* for a "
                "prefix). Full names: no SCHEDULERSTREAM_TOPIC_PREFIX is added.",
            ),
        ]
    ):  # fmt: skip
        command = option(command)
    return command


def _plan(
    components: tuple[str, ...],
    principals: tuple[str, ...],
    pools: tuple[str, ...],
    target_topics: tuple[str, ...],
) -> list[acls.Grant]:
    chosen = {c: f"User:{c}" for c in (components or acls.COMPONENTS)}
    for item in principals:
        component, sep, principal = item.partition("=")
        if not sep or component not in acls.COMPONENTS:
            raise click.BadParameter(
                f"{item!r}: expected COMPONENT=TYPE:NAME with COMPONENT one of "
                f"{', '.join(acls.COMPONENTS)}",
                param_hint="--principal",
            )
        if component in chosen or not components:
            chosen[component] = principal
    return acls.plan(load_settings(), chosen, pools, target_topics)


@acls_group.command()
@_options
def plan(
    components: tuple[str, ...],
    principals: tuple[str, ...],
    pools: tuple[str, ...],
    target_topics: tuple[str, ...],
) -> None:
    """Print the ACLs each component needs (ALLOW, any host), one per line."""
    click.echo(acls.table(_plan(components, principals, pools, target_topics)))


@acls_group.command()
@_options
def apply(
    components: tuple[str, ...],
    principals: tuple[str, ...],
    pools: tuple[str, ...],
    target_topics: tuple[str, ...],
) -> None:
    """Create the ACLs of `acls plan` (run as an admin: SCHEDULERSTREAM_KAFKA_CONFIG_FILE)."""
    grants = _plan(components, principals, pools, target_topics)
    count = acls.apply(load_settings(), grants)
    click.echo(f"{count} ACLs in place for {len({g.principal for g in grants})} principals")

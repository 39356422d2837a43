"""``schedulerstream cron …``: preview cron instants with DST notes."""

from __future__ import annotations

import click


@click.group()
def cron() -> None:
    """Cron expression tools."""

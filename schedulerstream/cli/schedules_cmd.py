"""``schedulerstream schedules put|delete``: write job definitions to cron.schedules."""

from __future__ import annotations

import sys
from typing import IO

import click

from schedulerstream.errors import SchedulerStreamError, ValidationError
from schedulerstream.jobfile import parse_job_file
from schedulerstream.publish import Publisher
from schedulerstream.settings import load_settings


@click.group()
def schedules() -> None:
    """Create, replace and delete job definitions."""


@schedules.command()
@click.argument("file", type=click.File("r"))
def put(file: IO[str]) -> None:
    """Validate every job in FILE ('-' for stdin), then produce them all."""
    jobs, errors = parse_job_file(file.read())
    if errors:
        for error in errors:
            click.echo(f"error: {error}", err=True)
        click.echo("nothing was produced", err=True)
        sys.exit(2)
    try:
        written = Publisher(load_settings()).put_jobs(jobs)
    except ValidationError as exc:
        click.echo(f"error: {exc.field}: {exc.message}", err=True)
        click.echo("nothing was produced", err=True)
        sys.exit(2)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    for job in written:
        click.echo(f"{job.key} version {job.version}")


@schedules.command()
@click.argument("job_key", metavar="TENANT/JOB_ID")
def delete(job_key: str) -> None:
    """Delete a job (a tombstone on cron.schedules): no run after it is applied."""
    try:
        Publisher(load_settings()).delete_job(job_key)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{job_key} deleted")

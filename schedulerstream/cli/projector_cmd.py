"""``schedulerstream projector``: run one projector instance."""

from __future__ import annotations

import click

from schedulerstream.cli.processors_cmd import processes_option, run_processor, supervise
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka.access import check_access
from schedulerstream.logs import configure_logging
from schedulerstream.projector.topology import DEFAULT_KEEP_PER_JOB, ProjectorTopology
from schedulerstream.readmodel import open_read_model
from schedulerstream.settings import load_settings


@click.command()
@click.option(
    "--keep-runs",
    type=click.IntRange(min=1),
    default=DEFAULT_KEEP_PER_JOB,
    show_default=True,
    help="Runs kept per job in the read model and cron.run-state (older ones are deleted).",
)
@processes_option
def projector(keep_runs: int, processes: int) -> None:
    """Run one projector: the read model (SQLite in the data dir, or PostgreSQL when
    SCHEDULERSTREAM_DATABASE_URL is set) and the cron.run-state topic."""
    if processes > 1:
        supervise("projector", ["projector", "--keep-runs", str(keep_runs)], processes)
    configure_logging("projector")
    try:
        settings = load_settings()
        check_access(settings, "projector")  # it may log in and has its ACLs (kafka/access.py)
        with open_read_model(settings) as model:
            run_processor(settings, ProjectorTopology(settings, model, keep_per_job=keep_runs))
    except SchedulerStreamError as exc:  # ReadModelDown among them
        raise click.ClickException(str(exc)) from exc

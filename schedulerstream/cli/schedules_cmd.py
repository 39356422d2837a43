"""``schedulerstream schedules put|delete``: write job definitions to cron.schedules."""

from __future__ import annotations

import gc
import sys
from typing import IO, TYPE_CHECKING

import click

from schedulerstream.bulkload import prepare
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.jobfile import Progress
from schedulerstream.publish import Publisher
from schedulerstream.settings import load_settings

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar


class StageProgress:
    """``put``'s stages (validating, encoding, writing) on stderr: a bar when stderr is a
    terminal, else a line per tenth of each stage."""

    def __init__(self, bar: bool) -> None:
        self.bar = bar
        self._stage = ""
        self._bar: ProgressBar[int] | None = None
        self._tenths = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self._stage:
            self.close()
            self._stage, self._tenths = stage, 0
            if self.bar:
                self._bar = click.progressbar(length=total, label=f"{stage:10}", file=sys.stderr)
        if self._bar is not None:
            self._bar.update(done - self._bar.pos)
            return
        tenths = 10 * done // max(total, 1)
        if tenths > self._tenths:
            self._tenths = tenths
            click.echo(f"{stage}: {done:,} of {total:,} jobs", err=True)

    def close(self) -> None:
        """End the current bar's line."""
        if self._bar is not None:
            self._bar.render_finish()
            self._bar = None


@click.group()
def schedules() -> None:
    """Create, replace and delete job definitions."""


@schedules.command()
@click.argument("file", type=click.File("r"))
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr (default: a bar when stderr is a terminal, else nothing).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that check a long JSON-lines file (default: one a usable core).",
)
def put(file: IO[str], progress: bool | None, processes: int | None) -> None:
    """Validate every job in FILE ('-' for stdin), then produce them all.

    Prints one "TENANT/JOB_ID version N" line per job written on stdout; errors and progress
    go to stderr."""
    settings = load_settings()
    text = file.read()
    # connects while the file is checked, after any worker process is forked
    publisher = Publisher(settings, connect=False)
    shown = sys.stderr.isatty() if progress is None else progress
    report = StageProgress(bar=sys.stderr.isatty()) if shown else None
    try:
        written, errors = put_text(publisher, text, report, processes)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if report is not None:
            report.close()
    if errors:
        for error in errors:
            click.echo(f"error: {error}", err=True)
        click.echo("nothing was produced", err=True)
        sys.exit(2)
    if written:
        click.echo("\n".join(f"{key} version {version}" for key, version in written))


def put_text(
    publisher: Publisher,
    text: str,
    progress: Progress | None = None,
    processes: int | None = None,
) -> tuple[list[tuple[str, int]], list[str]]:
    """What ``put`` does with a job file's text: (job key, version) of each job written, or
    why none was (every error of the file, else the first job over a record limit).

    A long JSON-lines file is checked in ``processes`` processes (default: one a usable core)
    when ``publisher`` is not connected yet (``bulkload``)."""
    collecting = gc.isenabled()
    gc.disable()  # a bulk load adds live objects only: each collection would rescan them all
    try:
        prepared = prepare(publisher, text, progress, processes)
        if prepared.errors:
            return [], prepared.errors
        publisher.write_jobs(prepared.records, progress=progress)
        return prepared.written, []
    finally:
        gc.freeze()  # and so would the first one after: what the load built is left out
        if collecting:
            gc.enable()


@schedules.command()
@click.argument("job_key", metavar="TENANT/JOB_ID")
def delete(job_key: str) -> None:
    """Delete a job (a tombstone on cron.schedules): no run after it is applied."""
    try:
        Publisher(load_settings()).delete_job(job_key)
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{job_key} deleted")

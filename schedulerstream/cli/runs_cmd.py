"""``schedulerstream runs tail|list|get|cancel``: watch emitted runs; query and cancel runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from schedulerstream.codec import default_codec
from schedulerstream.errors import CodecError, SchedulerStreamError
from schedulerstream.ids import job_key_of_run, split_job_key
from schedulerstream.kafka.reader import read_topic
from schedulerstream.publish import Publisher
from schedulerstream.readmodel import RUN_STATUSES, RunDetail, RunRow, open_read_model
from schedulerstream.settings import load_settings


@click.group()
def runs() -> None:
    """Inspect runs."""


def iso(instant_us: int) -> str:
    moment = datetime.fromtimestamp(instant_us / 1_000_000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_line(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """The JSON shape of one cron.runs record."""
    line: dict[str, Any] = {
        "run_id": record["run_id"],
        "tenant": record["tenant"],
        "job_id": record["job_id"],
        "scheduled_at": iso(record["scheduled_at_us"]),
    }
    if name == "RunRevoked":
        line.update({"revoked": True, "revoked_at": iso(record["revoked_at_us"]),
                     "reason": record["reason"], "job_version": record["job_version"]})  # fmt: skip
        return line
    line.update(
        {
            "not_before": iso(record["not_before_us"]),
            "emitted_at": iso(record["emitted_at_us"]),
            "trigger": record["trigger"],
            "job_version": record["job_version"],
            "payload": None
            if record["payload_json"] is None
            else json.loads(record["payload_json"]),
        }
    )
    return line


@runs.command()
@click.option("--from-beginning", is_flag=True, help="Start at the oldest retained run.")
@click.option("--idle-timeout", type=float, default=10.0, show_default=True,
              help="Exit after this many seconds without a new run.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--with-revocations", is_flag=True, help="Also show RunRevoked records.")
def tail(from_beginning: bool, idle_timeout: float, as_json: bool, with_revocations: bool) -> None:
    """Print runs from cron.runs (read_committed) until idle."""
    settings = load_settings()
    codec = default_codec()
    try:
        for message in read_topic(settings, settings.topics.runs, from_beginning, idle_timeout):
            try:
                name, record = codec.decode(message.value())
            except CodecError as exc:
                click.echo(
                    f"skipping undecodable record at offset {message.offset()}: {exc}", err=True
                )
                continue
            if name == "RunRevoked" and not with_revocations:
                continue
            line = run_line(name, record)
            if as_json:
                click.echo(json.dumps(line))
            else:
                what = "REVOKED" if line.get("revoked") else line["trigger"]
                click.echo(f"{line['scheduled_at']}  {what:<9}  {line['run_id']}")
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc


def _run_json(row: RunRow) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "status": row.status,
        "trigger": row.trigger,
        "scheduled_at": iso(row.scheduled_at_us),
        "started_at": None if row.started_at_us is None else iso(row.started_at_us),
        "finished_at": None if row.finished_at_us is None else iso(row.finished_at_us),
        "attempts": row.attempts,
        "last_error": row.last_error,
    }


@runs.command("list")
@click.argument("job_key", metavar="TENANT/JOB_ID")
@click.option("--status", type=click.Choice(RUN_STATUSES), help="Only runs in this status.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_runs(job_key: str, status: str | None, limit: int, as_json: bool) -> None:
    """A job's runs from the read model, newest first."""
    tenant, job_id = split_job_key(job_key)
    with open_read_model(load_settings()) as model:
        page = model.list_runs(tenant, job_id, None, limit, status)
    for row in page.items:
        line = _run_json(row)
        if as_json:
            click.echo(json.dumps(line))
        else:
            click.echo(f"{line['scheduled_at']}  {row.status:<13}  {row.run_id}")


def _detail(run_id: str) -> RunDetail:
    tenant, _ = split_job_key(job_key_of_run(run_id))
    with open_read_model(load_settings()) as model:
        detail = model.get_run(tenant, run_id)
    if detail is None:
        raise click.ClickException(f"no run {run_id} in the read model")
    return detail


@runs.command("get")
@click.argument("run_id")
def get_run(run_id: str) -> None:
    """One run with its attempt events (JSON)."""
    detail = _detail(run_id)
    line = _run_json(detail.run)
    line["attempt_events"] = [
        {"attempt": a.attempt, "kind": a.kind, "at": iso(a.at_us), "reason": a.reason,
         "status_code": a.status_code}
        for a in detail.attempts
    ]  # fmt: skip
    click.echo(json.dumps(line, indent=2))


@runs.command("cancel")
@click.argument("run_id")
@click.option("--reason", default="cancelled by an operator", show_default=True)
def cancel(run_id: str, reason: str) -> None:
    """Ask the dispatcher to cancel a run (a CancelRun command)."""
    detail = _detail(run_id)
    if detail.run.status not in ("pending", "running"):
        raise click.ClickException(f"run {run_id} already {detail.run.status}")
    Publisher(load_settings()).cancel_run(run_id, reason)
    click.echo(f"cancel of {run_id} requested")

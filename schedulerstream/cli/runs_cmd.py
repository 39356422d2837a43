"""``schedulerstream runs tail``: watch the runs the scheduler emits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from schedulerstream.codec import default_codec
from schedulerstream.errors import CodecError, SchedulerStreamError
from schedulerstream.kafka.reader import read_topic
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
        for message in read_topic(settings, settings.topic("runs"), from_beginning, idle_timeout):
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

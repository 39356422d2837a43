"""``schedulerstream jobs …`` and ``backfill``: operators' view of any tenant's jobs (read model)
and writes (events on cron.schedules / cron.commands, acknowledged before returning)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import click
from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from schedulerstream.codec import default_codec
from schedulerstream.errors import CodecError, SchedulerStreamError
from schedulerstream.ids import manual_run_id, split_job_key
from schedulerstream.kafka.clients import restore_consumer_config
from schedulerstream.model import JobDefinition, instant_us
from schedulerstream.publish import Publisher, now_us
from schedulerstream.readmodel import JobRow, open_read_model
from schedulerstream.settings import Settings, load_settings
from schedulerstream.timing import next_instants
from schedulerstream.timing.spec import schedule_of

REDACTED = "redacted"
JOB_KEY = click.argument("job_key", metavar="TENANT/JOB_ID")


class _Group(click.Group):
    """Reports schedulerstream errors (unknown job, broker down) as one-line errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerStreamError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
def jobs() -> None:
    """Inspect and operate jobs of any tenant."""


def _iso(instant: int | None) -> str | None:
    if instant is None:
        return None
    return datetime.fromtimestamp(instant / 1e6, tz=UTC).isoformat().replace("+00:00", "Z")


def _row_json(row: JobRow) -> dict[str, Any]:
    return {
        "job": f"{row.tenant}/{row.job_id}",
        "version": row.version,
        "paused": row.paused,
        "paused_reason": row.definition.get("paused_reason") if row.paused else None,
        "next_fire_at": [_iso(t) for t in row.next_fire_at_us],
        "last_run": None
        if row.last_run_id is None
        else {"run_id": row.last_run_id, "status": row.last_run_status},
        "definition": row.definition,
    }


def live_job(settings: Settings, job_key: str) -> JobRow:
    """The job's read-model row; raises if unknown or deleted."""
    tenant, job_id = split_job_key(job_key)
    with open_read_model(settings) as model:
        row = model.get_job(tenant, job_id)
    if row is None or row.deleted:
        raise SchedulerStreamError(f"no job {job_key} in the read model")
    return row


@jobs.command("list")
@click.argument("tenant")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_jobs(tenant: str, limit: int, as_json: bool) -> None:
    """List TENANT's jobs, newest first."""
    with open_read_model(load_settings()) as model:
        page = model.list_jobs(tenant, None, limit)
    for row in page.items:
        if as_json:
            click.echo(json.dumps(_row_json(row)))
        else:
            state = "paused" if row.paused else "active"
            reason = row.definition.get("paused_reason") if row.paused else None
            if reason:
                state += f" ({reason})"
            nxt = _iso(row.next_fire_at_us[0]) if row.next_fire_at_us else "-"
            click.echo(f"{row.tenant}/{row.job_id}  v{row.version}  {state}  next {nxt}")


@jobs.command()
@JOB_KEY
def get(job_key: str) -> None:
    """Print a job (JSON; webhook secrets redacted)."""
    click.echo(json.dumps(_row_json(live_job(load_settings(), job_key)), indent=2))


def _set_paused(job_key: str, paused: bool) -> None:
    settings = load_settings()
    row = live_job(settings, job_key)
    if row.paused == paused:
        click.echo(f"{job_key} already {'paused' if paused else 'active'} (version {row.version})")
        return
    if row.definition.get("target", {}).get("secret") == REDACTED:
        raise SchedulerStreamError(
            f"{job_key} has a webhook secret the read model does not keep; "
            f"`schedules put` its full definition with paused: {str(paused).lower()}"
        )
    job = JobDefinition.model_validate({**row.definition, "paused": paused, "paused_reason": None})
    version = max(now_us(), row.version + 1)
    [written] = Publisher(settings).put_jobs([job.with_version(version)])
    click.echo(f"{job_key} {'paused' if paused else 'resumed'} (version {written.version})")


@jobs.command()
@JOB_KEY
def pause(job_key: str) -> None:
    """Stop scheduled runs of a job (manual triggers still run)."""
    _set_paused(job_key, True)


@jobs.command()
@JOB_KEY
def resume(job_key: str) -> None:
    """Resume scheduled runs of a job."""
    _set_paused(job_key, False)


@jobs.command()
@JOB_KEY
@click.option("--request-id", help="Idempotency key (default: random).")
@click.option("--payload", help="JSON payload for this run (default: the job's).")
def trigger(job_key: str, request_id: str | None, payload: str | None) -> None:
    """Run a job now (also while paused) and print the run id."""
    settings = load_settings()
    live_job(settings, job_key)
    if payload is not None:
        try:
            json.loads(payload)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    request = request_id or uuid.uuid4().hex
    run_id = manual_run_id(job_key, request)
    fields = {"request_id": request, "payload_json": payload}
    Publisher(settings).command(job_key, "TriggerNow", fields)
    click.echo(run_id)


@jobs.command()
@JOB_KEY
def delete(job_key: str) -> None:
    """Delete a job (a tombstone on cron.schedules)."""
    settings = load_settings()
    live_job(settings, job_key)
    Publisher(settings).delete_job(job_key)
    click.echo(f"{job_key} deleted")


def _instant(value: datetime) -> int:
    return instant_us(value if value.tzinfo is not None else value.replace(tzinfo=UTC))


def _runs_consumer(settings: Settings) -> Consumer:
    """A consumer of every cron.runs partition from its current end."""
    config = restore_consumer_config(settings, f"schedulerstream-backfill-{uuid.uuid4().hex[:8]}")
    config["enable.partition.eof"] = False
    consumer = Consumer(config)
    topic = settings.topics.runs
    info = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in info.partitions])
    while not consumer.assignment():
        time.sleep(0.01)
    consumer.poll(0.5)  # resolve the end offsets before the command is produced
    return consumer


@click.command()
@JOB_KEY
@click.option("--start", type=click.DateTime(), required=True, help="First instant (UTC).")
@click.option("--end", type=click.DateTime(), required=True, help="Exclusive end (UTC).")
@click.option("--rerun", is_flag=True, help="New run ids instead of the scheduled ones.")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Give up following progress after this many seconds.")  # fmt: skip
def backfill(job_key: str, start: datetime, end: datetime, rerun: bool, timeout: float) -> None:
    """Create the runs of a job's schedule in [--start, --end), showing progress."""
    settings = load_settings()
    start_us, end_us = _instant(start), _instant(end)
    if end_us <= start_us:
        raise click.BadParameter("must be after --start", param_hint="--end")
    row = live_job(settings, job_key)
    definition = {**row.definition, "target": {**row.definition["target"], "secret": None}}
    schedule = schedule_of(JobDefinition.model_validate(definition).to_avro()["schedule"])
    stop = min(end_us, now_us())
    total = len(next_instants(schedule, start_us - 1, 10_000_000, until_us=stop - 1))
    request = uuid.uuid4().hex
    consumer = _runs_consumer(settings)
    try:
        fields = {"request_id": request, "start_us": start_us, "end_us": end_us, "rerun": rerun}
        Publisher(settings).command(job_key, "Backfill", fields)
        seen = _follow(consumer, job_key, request if rerun else None, start_us, stop, total,
                       timeout)  # fmt: skip
    finally:
        consumer.close()
    click.echo(f"{job_key}: {seen} of {total} backfill runs created")


def _follow(
    consumer: Consumer, job_key: str, request: str | None, start_us: int, stop_us: int,
    total: int, timeout: float,
) -> int:  # fmt: skip
    """Count this backfill's runs on cron.runs, with a progress bar, until all or timeout."""
    codec = default_codec()
    tenant, job_id = split_job_key(job_key)
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    with click.progressbar(length=total, label="runs", file=sys.stderr) as bar:
        while len(seen) < total and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.2):
                if message.error() is not None:
                    continue
                try:
                    name, record = codec.decode(message.value())
                except CodecError:
                    continue
                if name != "RunTriggered" or record["trigger"] != "backfill":
                    continue
                if (record["tenant"], record["job_id"]) != (tenant, job_id):
                    continue
                if not start_us <= record["scheduled_at_us"] < stop_us:
                    continue
                if request is not None and not record["run_id"].endswith(f"~{request}"):
                    continue
                if record["run_id"] not in seen:
                    seen.add(record["run_id"])
                    bar.update(1)
    return len(seen)

"""``schedulerstream tenants create|update|revoke-key|list``: tenant records on cron.tenants."""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.ingest import describe_validation
from schedulerstream.settings import load_settings
from schedulerstream.tenants import TenantAdmin, TenantRecord


class _Group(click.Group):
    """Reports schedulerstream errors (unknown tenant, broker down) as one-line errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerStreamError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
def tenants() -> None:
    """Manage tenants and their API keys."""


def _limits(record: TenantRecord) -> str:
    concurrency = record.concurrency if record.concurrency is not None else "default"
    rate = record.rate_per_s if record.rate_per_s is not None else "default"
    pools = "any" if record.pools is None else ",".join(record.pools) or "none"
    topics = "any" if record.topics is None else ",".join(record.topics) or "none"
    return (f"weight={record.weight:g} concurrency={concurrency} rate={rate} "
            f"pools={pools} topics={topics}")  # fmt: skip


def _granted(values: tuple[str, ...], any_given: bool, none_given: bool, what: str
             ) -> tuple[bool, list[str] | None]:  # fmt: skip
    """(given, the new list) from --X/--any-X/--no-X; None grants any."""
    if sum((bool(values), any_given, none_given)) > 1:
        raise click.UsageError(f"give --{what} (repeatable), --any-{what} or --no-{what}, not more")
    if any_given:
        return True, None
    if none_given:
        return True, []
    return bool(values), list(dict.fromkeys(values)) if values else None


def _shown(record: TenantRecord) -> dict[str, object]:
    data = record.model_dump(exclude={"key_hash", "format"})
    data["has_key"] = record.key_hash is not None
    return data


@tenants.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print {tenant, api_key} as JSON.")
def create(name: str, as_json: bool) -> None:
    """Create tenant NAME and print its API key (shown only this once)."""
    record, api_key = TenantAdmin(load_settings()).create(name)
    if as_json:
        click.echo(json.dumps({"tenant": record.tenant, "api_key": api_key}))
        return
    click.echo(f"tenant {record.tenant} created")
    click.echo(f"api key (shown once, store it now): {api_key}")


@tenants.command()
@click.argument("name")
@click.option("--weight", type=click.FloatRange(min=0, min_open=True), help="Fair-share weight.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Runs in flight at most.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Dispatches per second.")
@click.option("--pool", "pools", multiple=True, help="A worker pool NAME's runs may use "
              "(repeatable; the list replaces the one before).")  # fmt: skip
@click.option("--any-pool", is_flag=True, help="Any worker pool (the default).")
@click.option("--no-pool", is_flag=True, help="No worker pool.")
@click.option("--topic", "topics", multiple=True, help="A Kafka topic NAME's runs may write "
              "(repeatable; 'prefix*' for every topic it begins; replaces the list).")  # fmt: skip
@click.option("--any-topic", is_flag=True, help="Any Kafka topic (the default).")
@click.option("--no-topic", is_flag=True, help="No Kafka topic.")
def update(name: str, weight: float | None, concurrency: int | None, rate: float | None,
           pools: tuple[str, ...], any_pool: bool, no_pool: bool, topics: tuple[str, ...],
           any_topic: bool, no_topic: bool) -> None:  # fmt: skip
    """Set NAME's fair-share weight, limits and the worker pools and Kafka topics its runs may
    reach (options not given stay as they are)."""
    changes = {"weight": weight, "concurrency": concurrency, "rate_per_s": rate}
    given: dict[str, Any] = {k: v for k, v in changes.items() if v is not None}
    options = (("pools", pools, any_pool, no_pool), ("topics", topics, any_topic, no_topic))
    for field, values, any_given, none_given in options:
        was_given, granted = _granted(values, any_given, none_given, field[:-1])
        if was_given:
            given[field] = granted
    if not given:
        raise click.UsageError(
            "give at least one of --weight, --concurrency, --rate, --pool, --topic"
        )
    try:
        record = TenantAdmin(load_settings()).update(name, **given)
    except PydanticValidationError as exc:
        raise click.UsageError(describe_validation(exc)) from None
    click.echo(f"tenant {record.tenant}: {_limits(record)}")


@tenants.command("revoke-key")
@click.argument("name")
@click.option("--no-new-key", is_flag=True, help="Leave NAME without any key.")
@click.option("--json", "as_json", is_flag=True, help="Print {tenant, api_key} as JSON.")
def revoke_key(name: str, no_new_key: bool, as_json: bool) -> None:
    """Invalidate NAME's API key and print a new one (unless --no-new-key)."""
    record, api_key = TenantAdmin(load_settings()).revoke_key(name, issue_new=not no_new_key)
    if as_json:
        click.echo(json.dumps({"tenant": record.tenant, "api_key": api_key}))
    elif api_key is None:
        click.echo(f"tenant {record.tenant}: key revoked; no key is valid now")
    else:
        click.echo(f"tenant {record.tenant}: old key revoked")
        click.echo(f"new api key (shown once, store it now): {api_key}")


@tenants.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_tenants(as_json: bool) -> None:
    """List tenants and their limits (never keys)."""
    for record in sorted(TenantAdmin(load_settings()).records().values(), key=lambda r: r.tenant):
        if as_json:
            click.echo(json.dumps(_shown(record)))
        else:
            key = "key" if record.key_hash is not None else "no key"
            click.echo(f"{record.tenant}  {_limits(record)}  ({key})")

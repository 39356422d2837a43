"""``schedulerstream tenants create|update|revoke-key|list``: tenant records on cron.tenants."""

from __future__ import annotations

import json
from typing import Any

import click

from schedulerstream.errors import SchedulerStreamError
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
    return f"weight={record.weight:g} concurrency={concurrency} rate={rate}"


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
def update(name: str, weight: float | None, concurrency: int | None, rate: float | None) -> None:
    """Set NAME's fair-share weight and limits (options not given stay as they are)."""
    changes = {"weight": weight, "concurrency": concurrency, "rate_per_s": rate}
    given = {k: v for k, v in changes.items() if v is not None}
    if not given:
        raise click.UsageError("give at least one of --weight, --concurrency, --rate")
    record = TenantAdmin(load_settings()).update(name, **given)
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

"""``schedulerstream cron …``: preview cron instants with DST notes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from schedulerstream.clock import SystemClock
from schedulerstream.errors import ValidationError
from schedulerstream.timing import PreviewEntry, parse_cron, preview
from schedulerstream.timing.policy import DST_GAP_VALUES, DST_REPEAT_VALUES, DstGap, DstRepeat


@click.group()
def cron() -> None:
    """Cron expression tools."""


def _after(value: str | None) -> datetime:
    if value is None:
        return datetime.fromtimestamp(SystemClock().now_us() / 1_000_000, tz=UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 date-time", param_hint="--after"
        ) from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _utc_text(entry: PreviewEntry) -> str:
    return entry.utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def _local_text(entry: PreviewEntry) -> str:
    return entry.local.isoformat(timespec="seconds")


def _table(entries: list[PreviewEntry]) -> str:
    rows = [("UTC", "LOCAL", "NOTE")]
    rows += [(_utc_text(e), _local_text(e), e.note) for e in entries]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(
        f"{utc:<{widths[0]}}  {local:<{widths[1]}}  {note}".rstrip() for utc, local, note in rows
    )


@cron.command("next")
@click.argument("expression", nargs=-1, required=True)
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option(
    "--after",
    metavar="ISO8601",
    help="Show instants strictly after this date-time (default: now; UTC if no offset).",
)
@click.option("--count", default=5, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.option(
    "--dst-gap",
    type=click.Choice(DST_GAP_VALUES),
    default="auto",
    show_default=True,
    help="Local times skipped by a forward jump: fire at the jump, or skip.",
)
@click.option(
    "--dst-repeat",
    type=click.Choice(DST_REPEAT_VALUES),
    default="auto",
    show_default=True,
    help="Local times repeated by a backward jump: fire at the first occurrence, or both.",
)
@click.pass_context
def next_instants(
    ctx: click.Context,
    expression: tuple[str, ...],
    timezone: str,
    after: str | None,
    count: int,
    as_json: bool,
    dst_gap: DstGap,
    dst_repeat: DstRepeat,
) -> None:
    """Print the next instants of EXPRESSION with their local time and DST notes.

    EXPRESSION has 5 fields (m h dom mon dow), 6 with leading seconds, or is a macro such as
    @daily; quote it, or pass its fields as separate arguments.
    """
    text = " ".join(expression)
    start = _after(after)
    try:
        schedule = parse_cron(text, timezone, dst_gap, dst_repeat)
        entries = preview(text, timezone, start, count, dst_gap, dst_repeat)
    except ValidationError as exc:
        click.echo(f"error: {exc.field}: {exc.message}", err=True)
        ctx.exit(2)
    if as_json:
        payload = [{"utc": _utc_text(e), "local": _local_text(e), "note": e.note} for e in entries]
        click.echo(json.dumps(payload, indent=2))
        return
    kind = "fixed-time" if schedule.is_fixed_time else "wildcard"
    click.echo(
        f"{schedule.expression} in {timezone} ({kind}; dst_gap={schedule.dst_gap}, "
        f"dst_repeat={schedule.dst_repeat})"
    )
    if entries:
        click.echo(_table(entries))
    else:
        click.echo(f"no instants after {start.isoformat()}")

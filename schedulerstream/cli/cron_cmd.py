"""``schedulerstream cron …``: preview cron instants (of one expression or several, without
excluded dates) with DST notes."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import click

from schedulerstream.clock import SystemClock
from schedulerstream.contracts.policies import DST_GAP_VALUES, DST_REPEAT_VALUES, DstGap, DstRepeat
from schedulerstream.errors import CronSyntaxError, ValidationError
from schedulerstream.timing import CronSchedule, PreviewEntry, parse_cron, preview
from schedulerstream.timing.combine import DayRange, parse_excluded


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


def _parse(
    text: str, index: int, timezone: str, dst_gap: DstGap, dst_repeat: DstRepeat
) -> CronSchedule:
    """The schedule of one expression; an error in an ``--or`` one names it."""
    try:
        return parse_cron(text, timezone, dst_gap, dst_repeat)
    except CronSyntaxError as exc:
        if index == 0:
            raise
        raise CronSyntaxError(f"--or {text!r}: {exc.field}", exc.message) from None


def _sources(entry: PreviewEntry) -> str:
    return ",".join(str(i + 1) for i in entry.sources)


def _table(entries: list[PreviewEntry], several: bool) -> str:
    """UTC, LOCAL, (EXPR: which expressions fire, when there are several,) NOTE."""
    header = ("UTC", "LOCAL", "EXPR", "NOTE") if several else ("UTC", "LOCAL", "NOTE")
    rows = [header]
    for e in entries:
        rows.append(
            (_utc_text(e), _local_text(e), _sources(e), e.note)
            if several
            else (_utc_text(e), _local_text(e), e.note)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(
            [*(f"{cell:<{width}}" for cell, width in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in rows
    )


def _excluded_text(item: date | DayRange) -> str:
    return f"{item[0]}..{item[1]}" if isinstance(item, tuple) else item.isoformat()


@cron.command("next")
@click.argument("expression", nargs=-1, required=True)
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option(
    "--after",
    metavar="ISO8601",
    help="Show instants strictly after this date-time (default: now; UTC if no offset).",
)
@click.option(
    "--or",
    "more",
    metavar="EXPR",
    multiple=True,
    help="Another expression (repeatable): the union of their instants, each once.",
)
@click.option(
    "--exclude",
    metavar="DATE",
    multiple=True,
    help="A local date (YYYY-MM-DD) or range (FROM..TO, inclusive) without fires (repeatable).",
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
    more: tuple[str, ...],
    exclude: tuple[str, ...],
    count: int,
    as_json: bool,
    dst_gap: DstGap,
    dst_repeat: DstRepeat,
) -> None:
    """Print the next instants of EXPRESSION with their local time and DST notes.

    EXPRESSION has 5 fields (m h dom mon dow), 6 with leading seconds, or is a macro such as
    @daily; quote it, or pass its fields as separate arguments. Day of month also takes L (last
    day), LW (last weekday) and 15W (the weekday nearest the 15th); day of week TUE#2 (second
    Tuesday) and FRIL or 5L (last Friday); ? is * in either day field.
    """
    texts = [" ".join(expression), *more]
    start = _after(after)
    try:
        schedules = [
            _parse(text, index, timezone, dst_gap, dst_repeat) for index, text in enumerate(texts)
        ]
        excluded = [parse_excluded(text) for text in exclude]
        entries = preview(texts, timezone, start, count, dst_gap, dst_repeat, excluded)
    except ValidationError as exc:
        click.echo(f"error: {exc.field}: {exc.message}", err=True)
        ctx.exit(2)
    several = len(texts) > 1
    if as_json:
        payload = [
            {"utc": _utc_text(e), "local": _local_text(e), "note": e.note}
            | ({"expressions": [texts[i] for i in e.sources]} if several else {})
            for e in entries
        ]
        click.echo(json.dumps(payload, indent=2))
        return
    for index, schedule in enumerate(schedules):
        kind = "fixed-time" if schedule.is_fixed_time else "wildcard"
        label = f"[{index + 1}] " if several else ""
        zone = f" in {timezone}" if index == 0 else ""
        click.echo(
            f"{label}{schedule.expression}{zone} ({kind}; dst_gap={schedule.dst_gap}, "
            f"dst_repeat={schedule.dst_repeat})"
        )
    if excluded:
        click.echo(f"except on {', '.join(_excluded_text(item) for item in excluded)}")
    if entries:
        click.echo(_table(entries, several))
    else:
        click.echo(f"no instants after {start.isoformat()}")

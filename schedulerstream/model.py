"""The job definition as users write it (API body, CLI file, JSON on the topic), validated.

Every error names its field (pydantic's ``loc``); durations are seconds or ISO 8601 strings;
instants are ISO 8601 with an offset. ``to_avro``/``from_avro`` map to ``JobDefinition.avsc``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.contracts.policies import (
    DeliveryMode,
    DstGap,
    DstRepeat,
    MisfirePolicy,
    OverlapPolicy,
)
from schedulerstream.contracts.topic_names import reserved_topic
from schedulerstream.durations import parse_duration, to_us
from schedulerstream.errors import ValidationError as SchedulerValidationError
from schedulerstream.ids import ID_PATTERN
from schedulerstream.jsontext import compact

Duration = Annotated[float, BeforeValidator(parse_duration)]
Identifier = Annotated[str, Field(pattern=ID_PATTERN.pattern)]
_NS = "io.schedulerstream."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RESERVED_HEADERS = ("webhook-", "content-length", "host")
MAX_PAUSED_REASON = 1000
MAX_CRON_EXPRESSIONS = 20
MAX_EXCLUDED_DATES = 1000
MAX_PAUSE_AFTER_FAILURES = 10_000
NOTIFY_EVENTS = ("dead_lettered", "paused")


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("must include a UTC offset or 'Z' (e.g. 2025-01-01T00:00:00Z)")
    return value


def field_errors(exc: PydanticValidationError) -> list[tuple[str, str]]:
    """(dotted field, message) for each problem, without pydantic's "Value error, " prefix."""
    found = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "value"
        found.append((field, error["msg"].removeprefix("Value error, ")))
    return found


def instant_us(value: datetime) -> int:
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DateRange(_Strict):
    """Local dates ``from`` to ``to``, both included."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )

    from_: date = Field(alias="from")
    to: date

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.to < self.from_:
            raise ValueError(f"'to' ({self.to}) is before 'from' ({self.from_})")
        return self


def _date_or_range(value: Any) -> str:
    return "range" if isinstance(value, dict | DateRange) else "date"


ExcludedDate = Annotated[
    Annotated[date, Tag("date")] | Annotated[DateRange, Tag("range")],
    Discriminator(_date_or_range),
]


class ScheduleSpec(_Strict):
    """When a job fires: exactly one of ``cron`` (one expression or a list: the union of their
    instants), ``every`` or ``at``; never on an ``exclude``d local date of ``timezone``."""

    cron: str | list[str] | None = None
    every: Duration | None = None
    phase: Duration = 0.0
    at: datetime | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: Duration = 0.0
    dst_gap: DstGap = "auto"
    dst_repeat: DstRepeat = "auto"
    exclude: Annotated[list[ExcludedDate], Field(max_length=MAX_EXCLUDED_DATES)] = Field(
        default_factory=list
    )

    _check_instants = field_validator("at", "start_at", "end_at")(_aware)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from schedulerstream.timing import get_zone

        try:
            get_zone(value)
        except SchedulerValidationError as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("cron")
    @classmethod
    def _cron_syntax(cls, value: str | list[str] | None) -> str | list[str] | None:
        from schedulerstream.timing import parse_fields

        if isinstance(value, list) and not 1 <= len(value) <= MAX_CRON_EXPRESSIONS:
            raise ValueError(f"give 1 to {MAX_CRON_EXPRESSIONS} expressions (got {len(value)})")
        for index, text in enumerate([value] if isinstance(value, str) else value or []):
            try:
                parse_fields(text)
            except SchedulerValidationError as exc:
                where = "" if isinstance(value, str) else f"[{index}] {text!r}: "
                raise ValueError(f"{where}{exc.field}: {exc.message}") from None
        return value

    @property
    def cron_expressions(self) -> list[str]:
        """The cron expressions (none for every/at schedules)."""
        return [self.cron] if isinstance(self.cron, str) else list(self.cron or [])

    @property
    def excluded_ranges(self) -> list[tuple[date, date]]:
        """``exclude`` as inclusive (first, last) date pairs, one date being (day, day)."""
        return [
            (item.from_, item.to) if isinstance(item, DateRange) else (item, item)
            for item in self.exclude
        ]

    @field_validator("every")
    @classmethod
    def _positive_interval(cls, value: float | None) -> float | None:
        if value is not None and value < 1:  # a run id names its second: two in one collide
            raise ValueError("must be at least 1 s (runs are identified to the second)")
        return value

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> ScheduleSpec:
        kinds = [k for k in ("cron", "every", "at") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"set exactly one of cron, every, at (got {kinds or 'none'})")
        if self.cron is not None:
            from schedulerstream.timing import parse_cron

            for text in self.cron_expressions:
                try:
                    parse_cron(
                        text, self.timezone, dst_gap=self.dst_gap, dst_repeat=self.dst_repeat
                    )
                except SchedulerValidationError as exc:
                    raise ValueError(f"cron {exc.field}: {exc.message}") from None
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


# An http(s) URL whose authority is a plain ASCII host and a port below 10,000: urlsplit's
# verdict on it is known (yes), and the URL check was 8 % of a bulk load's CPU. Anything else goes
# to urlsplit (which checks ports itself from Python 3.16).
_PLAIN_HTTP_URL = re.compile(r"https?://[A-Za-z0-9._~!$&'()*+,;=%-]+(?::[0-9]{1,4})?(?:[/?#]|\Z)")


def is_http_url(value: str) -> bool:
    """Is ``value`` an http or https URL with a host (as ``urlsplit`` reads it)?"""
    if _PLAIN_HTTP_URL.match(value):
        return True
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class HttpTarget(_Strict):
    type: Literal["http"] = "http"
    url: str
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    secret: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not is_http_url(value):
            raise ValueError(f"{value!r} is not an http(s) URL with a host")
        return value

    @field_validator("headers")
    @classmethod
    def _no_reserved_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name.lower().startswith(_RESERVED_HEADERS):
                raise ValueError(f"header {name!r} is set by the dispatcher")
        return value

    @field_validator("secret")
    @classmethod
    def _whsec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("whsec_"):
            raise ValueError("must start with 'whsec_' followed by base64")
        try:
            key = base64.b64decode(value[6:], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the part after 'whsec_' is not valid base64") from None
        if len(key) < 16:
            raise ValueError("the key must be at least 16 bytes")
        return value


class KafkaTarget(_Strict):
    type: Literal["kafka"] = "kafka"
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]
    key: str | None = None


def topic_refusals(job: JobDefinition, prefix: str) -> list[tuple[str, str]]:
    """(field, why) for each Kafka target of ``job`` (``target.topic``,
    ``notify.target.topic``) that names a topic reserved under ``prefix``."""
    found = []
    for field, target in job.targets():
        if isinstance(target, KafkaTarget):
            reserved = reserved_topic(target.topic, prefix)
            if reserved is not None:
                found.append((f"{field}.topic", reserved))
    return found


class SqsTarget(_Strict):
    type: Literal["sqs"] = "sqs"
    queue_url: str
    region: Annotated[str, Field(pattern=r"^[a-z0-9-]{1,32}$")]
    message_group_id: str | None = None

    @field_validator("queue_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an SQS queue URL")
        return value


class WorkerTarget(_Strict):
    type: Literal["worker"] = "worker"
    pool: Identifier


Target = Annotated[HttpTarget | KafkaTarget | SqsTarget | WorkerTarget, Field(discriminator="type")]


class NotifySpec(_Strict):
    """Where a job's notifications go: ``on`` names the events, ``target`` is any target."""

    on: Annotated[list[Literal["dead_lettered", "paused"]], Field(min_length=1, max_length=2)]
    target: Target

    @field_validator("on")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"names an event twice: {value}")
        return value


class RetryPolicy(_Strict):
    max_attempts: Annotated[int, Field(ge=1, le=1000)] = 5
    initial_backoff: Duration = 1.0
    multiplier: Annotated[float, Field(ge=1.0, le=100.0)] = 2.0
    max_backoff: Duration = 300.0
    max_age: Duration = 3600.0


class JobDefinition(_Strict):
    """One job: who, when, where to, and how to retry."""

    tenant: Identifier
    job_id: Identifier
    version: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    schedule: ScheduleSpec
    target: Target
    payload: JsonValue = None
    paused: bool = False
    max_runs: Annotated[int, Field(ge=1)] | None = None
    misfire_policy: MisfirePolicy = "fire_once"
    catch_up_window: Duration = 3600.0
    overlap_policy: OverlapPolicy = "allow"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout: Annotated[Duration, Field(gt=0)] = 30.0
    delivery: DeliveryMode = "at_least_once"
    paused_reason: Annotated[str, Field(min_length=1, max_length=MAX_PAUSED_REASON)] | None = None
    pause_after_failures: Annotated[int, Field(ge=1, le=MAX_PAUSE_AFTER_FAILURES)] | None = None
    notify: NotifySpec | None = None

    @model_validator(mode="after")
    def _reason_only_when_paused(self) -> JobDefinition:
        if self.paused_reason is not None and not self.paused:
            raise ValueError("paused_reason is only allowed when paused is true")
        return self

    def targets(self) -> list[tuple[str, HttpTarget | KafkaTarget | SqsTarget | WorkerTarget]]:
        """(field, target) of its ``target`` and, if any, its ``notify.target``."""
        if self.notify is None:
            return [("target", self.target)]
        return [("target", self.target), ("notify.target", self.notify.target)]

    @property
    def key(self) -> str:
        return f"{self.tenant}/{self.job_id}"  # both validated as identifiers (frozen)

    def with_version(self, version: int) -> JobDefinition:
        return self.model_copy(update={"version": version})

    def to_avro(self, version: int | None = None) -> dict[str, Any]:
        """The record for ``JobDefinition.avsc``, with ``version`` if given, else the job's
        (one must be set)."""
        if version is None:
            version = self.version
        if version is None:
            raise SchedulerValidationError("version", "must be set before the job is produced")
        s = self.schedule
        return {
            "tenant": self.tenant,
            "job_id": self.job_id,
            "version": version,
            "schedule": {
                "cron": s.cron,
                "every_us": None if s.every is None else to_us(s.every),
                "phase_us": to_us(s.phase),
                "at_us": None if s.at is None else instant_us(s.at),
                "timezone": s.timezone,
                "start_at_us": None if s.start_at is None else instant_us(s.start_at),
                "end_at_us": None if s.end_at is None else instant_us(s.end_at),
                "jitter_us": to_us(s.jitter),
                "dst_gap": s.dst_gap,
                "dst_repeat": s.dst_repeat,
                "exclude": [
                    {"from_date": first.isoformat(), "to_date": last.isoformat()}
                    for first, last in s.excluded_ranges
                ],
            },
            "target": _target_to_avro(self.target),
            "payload_json": None if self.payload is None else compact(self.payload),
            "paused": self.paused,
            "max_runs": self.max_runs,
            "misfire_policy": self.misfire_policy,
            "catch_up_window_us": to_us(self.catch_up_window),
            "overlap_policy": self.overlap_policy,
            "retry": {
                "max_attempts": self.retry.max_attempts,
                "initial_backoff_us": to_us(self.retry.initial_backoff),
                "multiplier": self.retry.multiplier,
                "max_backoff_us": to_us(self.retry.max_backoff),
                "max_age_us": to_us(self.retry.max_age),
            },
            "timeout_us": to_us(self.timeout),
            "delivery": self.delivery,
            "paused_reason": self.paused_reason,
            "pause_after_failures": self.pause_after_failures,
            "notify": None
            if self.notify is None
            else (
                _NS + "NotifySpec",
                {"on": list(self.notify.on), "target": _target_to_avro(self.notify.target)},
            ),
        }

    @classmethod
    def from_avro(cls, record: dict[str, Any]) -> JobDefinition:
        """Validate a decoded ``JobDefinition`` Avro record (raises pydantic ValidationError,
        or ValueError naming a field no model input can hold)."""
        s = record["schedule"]
        retry = record["retry"]
        return cls.model_validate(
            {
                "tenant": record["tenant"],
                "job_id": record["job_id"],
                "version": record["version"],
                "schedule": {
                    "cron": s["cron"],
                    "every": None if s["every_us"] is None else s["every_us"] / 1e6,
                    "phase": s["phase_us"] / 1e6,
                    "at": _opt_from_us(s["at_us"], "schedule.at"),
                    "timezone": s["timezone"],
                    "start_at": _opt_from_us(s["start_at_us"], "schedule.start_at"),
                    "end_at": _opt_from_us(s["end_at_us"], "schedule.end_at"),
                    "jitter": s["jitter_us"] / 1e6,
                    "dst_gap": s["dst_gap"],
                    "dst_repeat": s["dst_repeat"],
                    "exclude": [_excluded_from_avro(item) for item in s.get("exclude") or ()],
                },
                "target": target_from_avro(record["target"]),
                "payload": _payload_from_avro(record["payload_json"]),
                "paused": record["paused"],
                "max_runs": record["max_runs"],
                "misfire_policy": record["misfire_policy"],
                "catch_up_window": record["catch_up_window_us"] / 1e6,
                "overlap_policy": record["overlap_policy"],
                "retry": {
                    "max_attempts": retry["max_attempts"],
                    "initial_backoff": retry["initial_backoff_us"] / 1e6,
                    "multiplier": retry["multiplier"],
                    "max_backoff": retry["max_backoff_us"] / 1e6,
                    "max_age": retry["max_age_us"] / 1e6,
                },
                "timeout": record["timeout_us"] / 1e6,
                "delivery": record["delivery"],
                "paused_reason": record.get("paused_reason"),
                "pause_after_failures": record.get("pause_after_failures"),
                "notify": notify_from_avro(record.get("notify")),
            }
        )


def _opt_from_us(value: int | None, field: str) -> datetime | None:
    if value is None:
        return None
    try:
        return from_us(value)
    except OverflowError:
        raise ValueError(f"{field}: {value} µs is not an instant of years 1-9999") from None


def _payload_from_avro(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"payload_json: not a JSON document ({exc})") from None


def notify_from_avro(value: Any) -> dict[str, Any] | None:
    """``notify`` of a decoded record as the ``NotifySpec`` model's input (None: none)."""
    if isinstance(value, tuple):  # the codec names the record of a union branch
        value = value[1]
    if value is None:
        return None
    return {"on": list(value["on"]), "target": target_from_avro(value["target"])}


def _excluded_from_avro(item: dict[str, str]) -> str | dict[str, str]:
    """One date as its ISO text, a longer range as ``{"from", "to"}``."""
    if item["from_date"] == item["to_date"]:
        return item["from_date"]
    return {"from": item["from_date"], "to": item["to_date"]}


def _target_to_avro(
    target: HttpTarget | KafkaTarget | SqsTarget | WorkerTarget,
) -> tuple[str, dict[str, Any]]:
    fields = target.model_dump(exclude={"type"})
    name = {
        "http": "HttpTarget",
        "kafka": "KafkaTarget",
        "sqs": "SqsTarget",
        "worker": "WorkerTarget",
    }
    return _NS + name[target.type], fields


def target_from_avro(value: Any) -> dict[str, Any]:
    """The target of a decoded ``JobDefinition`` Avro record, as the ``Target`` model's input."""
    name, fields = value
    kind = {
        "HttpTarget": "http",
        "KafkaTarget": "kafka",
        "SqsTarget": "sqs",
        "WorkerTarget": "worker",
    }
    return {"type": kind[name.rsplit(".", 1)[-1]], **fields}

"""DispatchSpec: the part of a job definition the dispatcher acts on, and its wire form.

The scheduler writes it once per job version into every run (``RunTriggered.dispatch_spec_json``,
``DispatchSpec.to_json``); the dispatcher reads it from there (``spec_of_json``) instead of
decoding the run's whole definition snapshot, which it still does for a run without one
(``spec_of_definition``). Both ways validate what the dispatcher keeps (target, timeout,
overlap, delivery, retry, the job's ``pause_after_failures`` and ``notify``) and raise
``ValidationError`` naming the bad field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.contracts.policies import DELIVERY_MODES, OVERLAP_POLICIES
from schedulerstream.errors import ValidationError
from schedulerstream.jsontext import compact_sorted
from schedulerstream.model import (
    NOTIFY_EVENTS,
    HttpTarget,
    JobDefinition,
    KafkaTarget,
    RetryPolicy,
    SqsTarget,
    Target,
    WorkerTarget,
    notify_from_avro,
    target_from_avro,
)

TargetConfig = HttpTarget | KafkaTarget | SqsTarget | WorkerTarget
RetryFields = tuple[int, float, float, float, float]  # max_attempts, initial, multiplier, max, age
_TARGET: TypeAdapter[TargetConfig] = TypeAdapter(Target)
FIELD = "dispatch_spec_json"


@dataclass(frozen=True, slots=True)
class DispatchSpec:
    """Target (as canonical JSON), timeout (s), overlap policy, delivery, retry policy; the
    job's ``pause_after_failures`` and its notify target (canonical JSON) and events."""

    target_json: str
    timeout: float
    overlap_policy: str
    delivery: str
    retry: RetryFields
    pause_after_failures: int | None = None
    notify_json: str | None = None
    notify_on: tuple[str, ...] = ()

    @classmethod
    def of(cls, job: JobDefinition) -> DispatchSpec:
        r = job.retry
        notify = job.notify
        return cls(
            canonical(job.target.model_dump(mode="json")),
            job.timeout,
            job.overlap_policy,
            job.delivery,
            (r.max_attempts, r.initial_backoff, r.multiplier, r.max_backoff, r.max_age),
            job.pause_after_failures,
            None if notify is None else canonical(notify.target.model_dump(mode="json")),
            () if notify is None else tuple(notify.on),
        )

    def notice(self) -> DispatchSpec:
        """The spec of a notification run of this job: the notify target, overlap ``allow``
        (it never waits for, replaces or blocks the job's runs), nothing of its own to notify."""
        if self.notify_json is None:
            raise ValidationError("notify", "the job has no notify target")
        return DispatchSpec(self.notify_json, self.timeout, "allow", self.delivery, self.retry)

    def to_list(self) -> list[Any]:
        fields = [self.target_json, self.timeout, self.overlap_policy, self.delivery, self.retry]
        if self.pause_after_failures is not None or self.notify_json is not None:
            fields += [self.pause_after_failures, self.notify_json, list(self.notify_on)]
        return fields

    def to_json(self) -> str:
        """The wire form: ``to_list`` as compact JSON (what ``spec_of_json`` reads)."""
        return canonical(self.to_list())

    @classmethod
    def from_list(cls, data: list[Any]) -> DispatchSpec:
        """The spec of ``to_list`` (a 5-field list of a record written before issue #16 too),
        unchecked: for the dispatcher's own records."""
        target_json, timeout, overlap, delivery, retry = data[:5]
        pause_after, notify_json, notify_on = data[5:8] if len(data) >= 8 else (None, None, ())
        return cls(target_json, timeout, overlap, delivery, tuple(retry), pause_after,
                   notify_json, tuple(notify_on))  # fmt: skip

    @property
    def target(self) -> TargetConfig:
        return target_config(self.target_json)

    @property
    def retry_policy(self) -> RetryPolicy:
        return retry_policy(self.retry)


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys (orjson, several times faster than json)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # a string with a lone surrogate, which json escapes
        return compact_sorted(value)


@lru_cache(maxsize=16_384)
def target_config(target_json: str) -> TargetConfig:
    """The validated target model of a spec (shared by every run with the same target)."""
    return _TARGET.validate_json(target_json)


@lru_cache(maxsize=1024)
def retry_policy(fields: RetryFields) -> RetryPolicy:
    attempts, initial, multiplier, maximum, age = fields
    return RetryPolicy(
        max_attempts=attempts,
        initial_backoff=initial,
        multiplier=multiplier,
        max_backoff=maximum,
        max_age=age,
    )


def spec_of_definition(record: dict[str, Any], *, check: bool = True) -> DispatchSpec:
    """The spec of a decoded ``JobDefinition`` Avro record, validated unless not ``check``
    (for a definition the job model validated already)."""
    retry = record["retry"]
    notify = notify_from_avro(record.get("notify"))
    spec = DispatchSpec(
        canonical(target_from_avro(record["target"])),
        record["timeout_us"] / 1e6,
        record["overlap_policy"],
        record["delivery"],
        (
            retry["max_attempts"],
            retry["initial_backoff_us"] / 1e6,
            retry["multiplier"],
            retry["max_backoff_us"] / 1e6,
            retry["max_age_us"] / 1e6,
        ),
        record.get("pause_after_failures"),
        None if notify is None else canonical(notify["target"]),
        () if notify is None else tuple(notify["on"]),
    )
    return checked(spec) if check else spec


def spec_of_json(text: str) -> DispatchSpec:
    """The validated spec of its wire form (``DispatchSpec.to_json``)."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(FIELD, f"not JSON: {exc}") from None
    if not (isinstance(data, list) and len(data) in (5, 8)):
        raise ValidationError(FIELD, "not a list of 5 or 8 fields")
    target_json, timeout, overlap, delivery, retry = data[:5]
    pause_after, notify_json, notify_on = data[5:] if len(data) == 8 else (None, None, [])
    _need(isinstance(target_json, str), "target", "not a JSON string")
    _need(_number(timeout), "timeout", f"not a number ({timeout!r})")
    _need(isinstance(overlap, str) and isinstance(delivery, str), "overlap_policy", "not text")
    _need(isinstance(retry, list) and len(retry) == 5 and all(map(_number, retry)), "retry",
          f"not 5 numbers ({retry!r})")  # fmt: skip
    _need(type(retry[0]) is int, "retry.max_attempts", f"not an integer ({retry[0]!r})")
    _need(pause_after is None or type(pause_after) is int, "pause_after_failures",
          f"not an integer ({pause_after!r})")  # fmt: skip
    _need(notify_json is None or isinstance(notify_json, str), "notify", "not a JSON string")
    _need(isinstance(notify_on, list) and all(isinstance(e, str) for e in notify_on),
          "notify.on", "not a list of text")  # fmt: skip
    spec = DispatchSpec(target_json, float(timeout), overlap, delivery, tuple(retry),
                        pause_after, notify_json, tuple(notify_on))  # fmt: skip
    return checked(spec)


def checked(spec: DispatchSpec) -> DispatchSpec:
    """``spec`` once its target, retry policy, timeout and policies are valid."""
    try:
        target_config(spec.target_json)  # cached: many jobs share a target
        retry_policy(spec.retry)
        if spec.notify_json is not None:
            target_config(spec.notify_json)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "target"
        raise ValidationError(where, first["msg"]) from None
    if not spec.timeout > 0:
        raise ValidationError("timeout", f"must be positive (got {spec.timeout})")
    _need(spec.overlap_policy in OVERLAP_POLICIES, "overlap_policy", repr(spec.overlap_policy))
    _need(spec.delivery in DELIVERY_MODES, "delivery", repr(spec.delivery))
    pause_after = spec.pause_after_failures
    _need(pause_after is None or pause_after >= 1, "pause_after_failures",
          f"must be >= 1 ({pause_after})")  # fmt: skip
    _need(set(spec.notify_on) <= set(NOTIFY_EVENTS), "notify.on",
          f"{list(spec.notify_on)}: not in {NOTIFY_EVENTS}")  # fmt: skip
    return spec


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _need(ok: bool, field: str, reason: str) -> None:
    if not ok:
        raise ValidationError(field, reason)

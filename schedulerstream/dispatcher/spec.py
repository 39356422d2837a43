"""DispatchSpec: the part of a job definition the dispatcher acts on, taken once per run.

A run carries the whole definition snapshot (the scheduler validated all of it). The
dispatcher validates and keeps only what it uses (target, timeout, overlap, delivery, retry,
and the job's ``pause_after_failures`` and ``notify``), so a run record stays small and a start
needs no decoding of the snapshot.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.codec import Codec
from schedulerstream.contracts.policies import DELIVERY_MODES, OVERLAP_POLICIES
from schedulerstream.errors import ValidationError as SchedulerValidationError
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

# What SpecReader keeps, in bytes (an entry: ENTRY_BYTES and its target and notify JSON). A run
# of a job whose spec is kept needs no decoding of its definition. A recurring job's spec is
# still kept at its next run while (its dispatcher's runs per second) x (its period in s)
# entries fit: 48 MiB holds about 70,000 specs of webhook targets (an entry measured 700 B
# with tracemalloc, 90 of them the target's JSON).
SPEC_CACHE_BYTES = 48 << 20
ENTRY_BYTES = 610
SHARED_RETRIES = 1024
RetryFields = tuple[int, float, float, float, float]  # max_attempts, initial, multiplier, max, age
_TARGET: TypeAdapter[TargetConfig] = TypeAdapter(Target)


@dataclass(frozen=True, slots=True)
class DispatchSpec:
    """Target (as canonical JSON), timeout (s), overlap policy, delivery, retry policy; the
    job's ``pause_after_failures`` and its notify target (canonical JSON) and events."""

    target_json: str
    timeout: float
    overlap_policy: str
    delivery: str
    retry: tuple[int, float, float, float, float]  # max_attempts, initial, multiplier, max, age
    pause_after_failures: int | None = None
    notify_json: str | None = None
    notify_on: tuple[str, ...] = ()

    @classmethod
    def of(cls, job: JobDefinition) -> DispatchSpec:
        r = job.retry
        notify = job.notify
        return cls(
            _canonical(job.target.model_dump(mode="json")),
            job.timeout,
            job.overlap_policy,
            job.delivery,
            (r.max_attempts, r.initial_backoff, r.multiplier, r.max_backoff, r.max_age),
            job.pause_after_failures,
            None if notify is None else _canonical(notify.target.model_dump(mode="json")),
            () if notify is None else tuple(notify.on),
        )

    def notice(self) -> DispatchSpec:
        """The spec of a notification run of this job: the notify target, overlap ``allow``
        (it never waits for, replaces or blocks the job's runs), nothing of its own to notify."""
        if self.notify_json is None:
            raise SchedulerValidationError("notify", "the job has no notify target")
        return DispatchSpec(self.notify_json, self.timeout, "allow", self.delivery, self.retry)

    def to_list(self) -> list[Any]:
        fields = [self.target_json, self.timeout, self.overlap_policy, self.delivery, self.retry]
        if self.pause_after_failures is not None or self.notify_json is not None:
            fields += [self.pause_after_failures, self.notify_json, list(self.notify_on)]
        return fields

    @classmethod
    def from_list(cls, data: list[Any]) -> DispatchSpec:
        """The spec of ``to_list`` (a 5-field list of a record written before issue #16 too)."""
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


def _canonical(value: Any) -> str:
    """Compact JSON with sorted keys (orjson, several times faster than json)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # a string with a lone surrogate, which json escapes
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=16_384)
def target_config(target_json: str) -> TargetConfig:
    """The validated target model of a spec (shared by every run with the same target)."""
    return _TARGET.validate_json(target_json)


def target_avro_json(value: Any) -> str:
    """The target of a decoded ``JobDefinition`` Avro record as canonical JSON."""
    return _canonical(target_from_avro(value))


@lru_cache(maxsize=1024)
def retry_policy(fields: tuple[int, float, float, float, float]) -> RetryPolicy:
    attempts, initial, multiplier, maximum, age = fields
    return RetryPolicy(
        max_attempts=attempts,
        initial_backoff=initial,
        multiplier=multiplier,
        max_backoff=maximum,
        max_age=age,
    )


def _entry_bytes(spec: DispatchSpec) -> int:
    return ENTRY_BYTES + len(spec.target_json) + len(spec.notify_json or "")


class SpecReader:
    """Decodes the definition snapshot of a run into a DispatchSpec, validating what it keeps.

    Raises SchedulerValidationError naming the bad field (the run is then rejected)."""

    def __init__(self, codec: Codec, cache_bytes: int = SPEC_CACHE_BYTES) -> None:
        self.codec = codec
        self.cache_bytes = cache_bytes
        self.cached_bytes = 0
        self._retries: dict[RetryFields, RetryFields] = {}
        self._cache: OrderedDict[tuple[str, int, int, int], tuple[str, DispatchSpec]] = (
            OrderedDict()
        )

    def read(self, raw: bytes, job_key: str, version: int) -> tuple[str, DispatchSpec]:
        """(job key, spec) of the snapshot ``raw`` of a run of ``job_key`` at ``version``.

        Cached (least recently used out) by the run's job and version and the snapshot's
        length and hash, not by the snapshot: its payload may be up to ``max_payload_bytes``."""
        key = (job_key, version, len(raw), hash(raw))
        cache = self._cache
        found = cache.get(key)
        if found is not None:
            cache.move_to_end(key)
            return found
        found = self._read(raw)
        if found[0] == job_key:  # one string for the key and the value
            found = (job_key, found[1])
        cache[key] = found
        self.cached_bytes += _entry_bytes(found[1])
        while self.cached_bytes > self.cache_bytes:
            self.cached_bytes -= _entry_bytes(cache.popitem(last=False)[1][1])
        return found

    def __len__(self) -> int:
        return len(self._cache)

    def _shared_retry(self, fields: RetryFields) -> RetryFields:
        """One tuple per retry policy for the kept specs (most jobs share a few policies)."""
        shared = self._retries.get(fields)
        if shared is not None:
            return shared
        if len(self._retries) < SHARED_RETRIES:
            self._retries[fields] = fields
        return fields

    def _read(self, raw: bytes) -> tuple[str, DispatchSpec]:
        """(job key, spec) of one snapshot."""
        record = self.codec.decode_as("JobDefinition", raw)
        try:
            target_json = target_avro_json(record["target"])
            target_config(target_json)  # validates (cached: many jobs share a target)
            retry = record["retry"]
            fields = (
                retry["max_attempts"],
                retry["initial_backoff_us"] / 1e6,
                retry["multiplier"],
                retry["max_backoff_us"] / 1e6,
                retry["max_age_us"] / 1e6,
            )
            retry_policy(fields)  # validates
            fields = self._shared_retry(fields)
            notify = notify_from_avro(record.get("notify"))
            notify_json = None if notify is None else _canonical(notify["target"])
            if notify_json is not None:
                target_config(notify_json)  # validates
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "target"
            raise SchedulerValidationError(where, first["msg"]) from None
        timeout = record["timeout_us"] / 1e6
        if not timeout > 0:
            raise SchedulerValidationError("timeout", f"must be positive (got {timeout})")
        if record["overlap_policy"] not in OVERLAP_POLICIES:
            raise SchedulerValidationError("overlap_policy", repr(record["overlap_policy"]))
        if record["delivery"] not in DELIVERY_MODES:
            raise SchedulerValidationError("delivery", repr(record["delivery"]))
        pause_after = record.get("pause_after_failures")
        if pause_after is not None and pause_after < 1:
            raise SchedulerValidationError("pause_after_failures", f"must be >= 1 ({pause_after})")
        notify_on = () if notify is None else tuple(notify["on"])
        if not set(notify_on) <= set(NOTIFY_EVENTS):
            raise SchedulerValidationError(
                "notify.on", f"{list(notify_on)}: not in {NOTIFY_EVENTS}"
            )
        spec = DispatchSpec(
            target_json,
            timeout,
            record["overlap_policy"],
            record["delivery"],
            fields,
            pause_after,
            notify_json,
            notify_on,
        )
        return f"{record['tenant']}/{record['job_id']}", spec

"""SpecReader: the DispatchSpec of each run, validated once and kept within a byte budget.

A run written by a current scheduler carries its spec (``dispatch_spec_json``): it is read
and kept by that text, so the runs of every job with the same spec share one entry. A run
without one (an older scheduler's, a notification) has its definition snapshot decoded, kept
by job, version and the snapshot's length and hash.
"""

from __future__ import annotations

from collections import OrderedDict

from schedulerstream.codec import Codec
from schedulerstream.dispatch_spec import (
    DispatchSpec,
    RetryFields,
    spec_of_definition,
    spec_of_json,
)

# What SpecReader keeps, in bytes (an entry: ENTRY_BYTES and its target and notify JSON). A
# recurring job's spec is still kept at its next run while (its dispatcher's runs per second)
# x (its period in s) distinct specs fit: 48 MiB holds about 70,000 specs of webhook targets
# (an entry measured 700 B with tracemalloc, 90 of them the target's JSON).
SPEC_CACHE_BYTES = 48 << 20
ENTRY_BYTES = 610
SHARED_RETRIES = 1024
CacheKey = tuple[str, int, int, int] | str


def _entry_bytes(key: CacheKey, spec: DispatchSpec) -> int:
    text = len(key) if isinstance(key, str) else 0
    return ENTRY_BYTES + text + len(spec.target_json) + len(spec.notify_json or "")


class SpecReader:
    """The spec of a run, from its ``dispatch_spec_json`` or its definition snapshot.

    Raises ValidationError naming the bad field (the run is then rejected)."""

    def __init__(self, codec: Codec, cache_bytes: int = SPEC_CACHE_BYTES) -> None:
        self.codec = codec
        self.cache_bytes = cache_bytes
        self.cached_bytes = 0
        self._retries: dict[RetryFields, RetryFields] = {}
        self._cache: OrderedDict[CacheKey, tuple[str, DispatchSpec]] = OrderedDict()

    def read_json(self, text: str) -> DispatchSpec:
        """The spec of its wire form ``text`` (kept by the text: jobs share specs)."""
        found = self._cache.get(text)
        if found is not None:
            self._cache.move_to_end(text)
            return found[1]
        spec = self._shared(spec_of_json(text))
        self._keep(text, ("", spec))
        return spec

    def read(self, raw: bytes, job_key: str, version: int) -> tuple[str, DispatchSpec]:
        """(job key, spec) of the snapshot ``raw`` of a run of ``job_key`` at ``version``.

        Kept by the run's job and version and the snapshot's length and hash, not by the
        snapshot: its payload may be up to ``max_payload_bytes``."""
        key = (job_key, version, len(raw), hash(raw))
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        found = self._read(raw)
        if found[0] == job_key:  # one string for the key and the value
            found = (job_key, found[1])
        self._keep(key, found)
        return found

    def __len__(self) -> int:
        return len(self._cache)

    def _keep(self, key: CacheKey, found: tuple[str, DispatchSpec]) -> None:
        cache = self._cache
        cache[key] = found
        self.cached_bytes += _entry_bytes(key, found[1])
        while self.cached_bytes > self.cache_bytes:
            old_key, (_, old) = cache.popitem(last=False)
            self.cached_bytes -= _entry_bytes(old_key, old)

    def _shared(self, spec: DispatchSpec) -> DispatchSpec:
        """``spec`` with one tuple per retry policy (most jobs share a few policies)."""
        shared = self._retries.get(spec.retry)
        if shared is None:
            if len(self._retries) < SHARED_RETRIES:
                self._retries[spec.retry] = spec.retry
            return spec
        if shared is spec.retry:
            return spec
        return DispatchSpec(spec.target_json, spec.timeout, spec.overlap_policy, spec.delivery,
                            shared, spec.pause_after_failures, spec.notify_json,
                            spec.notify_on)  # fmt: skip

    def _read(self, raw: bytes) -> tuple[str, DispatchSpec]:
        """(job key, spec) of one snapshot."""
        record = self.codec.decode_as("JobDefinition", raw)
        spec = self._shared(spec_of_definition(record))
        return f"{record['tenant']}/{record['job_id']}", spec

"""Tenant grants: the worker pools and Kafka topics a tenant's runs may reach."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from schedulerstream.model import HttpTarget, KafkaTarget, WorkerTarget
from schedulerstream.tenants.record import TenantGrants, TenantRecord


def record(**grants: object) -> TenantRecord:
    return TenantRecord.model_validate(
        {"tenant": "acme", "key_hash": None, "created_at_us": 0, "updated_at_us": 0, **grants}
    )


def test_a_record_without_grants_grants_everything() -> None:
    assert TenantGrants.of(record()) is None
    assert TenantGrants.of(record(pools=["x"])) is not None


def test_pools_are_matched_by_name() -> None:
    grants = TenantGrants.of(record(pools=["billing"]))
    assert grants is not None
    assert grants.refusal("acme", WorkerTarget(pool="billing")) is None
    refused = grants.refusal("acme", WorkerTarget(pool="payroll"))
    assert refused is not None and "worker pool 'payroll' is not granted to tenant acme" in refused
    assert grants.refusal("acme", KafkaTarget(topic="anything")) is None  # topics: any
    assert grants.refusal("acme", HttpTarget(url="https://x.test/")) is None


def test_topics_are_matched_by_name_or_prefix() -> None:
    grants = TenantGrants.of(record(topics=["acme.*", "shared.events"], pools=[]))
    assert grants is not None
    for topic in ("acme.out", "acme.", "shared.events"):
        assert grants.refusal("acme", KafkaTarget(topic=topic)) is None
    for topic in ("acmex", "shared.events2", "globex.out"):
        refused = grants.refusal("acme", KafkaTarget(topic=topic))
        assert refused is not None and f"Kafka topic {topic!r} is not granted" in refused
    assert grants.refusal("acme", WorkerTarget(pool="any")) is not None  # no pool at all
    everything = TenantGrants.of(record(topics=["*"]))
    assert everything is not None and everything.refusal("a", KafkaTarget(topic="z")) is None


@pytest.mark.parametrize("bad", [["a*b"], ["no spaces"], [""], ["x" * 250]])
def test_a_topic_grant_must_be_a_topic_name_or_prefix(bad: list[str]) -> None:
    with pytest.raises(ValidationError, match="topics"):
        record(topics=bad)


def test_an_older_record_without_grants_still_decodes() -> None:
    old = b'{"format":1,"tenant":"acme","key_hash":null,"created_at_us":1,"updated_at_us":2}'
    decoded = TenantRecord.decode(old)
    assert (decoded.pools, decoded.topics) == (None, None)

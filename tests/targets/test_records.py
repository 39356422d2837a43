"""Delivery, the envelope, Standard Webhooks signing and the Kafka record."""

from __future__ import annotations

import json

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.jsontext import compact
from schedulerstream.model import KafkaTarget as KafkaTargetConfig
from schedulerstream.targets import Delivery, kafka_record
from schedulerstream.targets.envelope import envelope_bytes, iso_utc
from schedulerstream.targets.signing import secret_key, signature, webhook_headers
from tests.targets.helpers import SCHEDULED_US, SECRET, delivery, expected_signature


def test_delivery_checks_attempt_and_deadline() -> None:
    with pytest.raises(ValueError, match="attempt"):
        delivery(attempt=0)
    with pytest.raises(ValueError, match="deadline"):
        delivery(deadline=0.0)


def test_delivery_from_a_run_triggered_record() -> None:
    record = {
        "run_id": "acme/nightly@20250101T000000Z",
        "tenant": "acme",
        "job_id": "nightly",
        "scheduled_at_us": SCHEDULED_US,
        "not_before_us": SCHEDULED_US,
        "emitted_at_us": SCHEDULED_US,
        "trigger": "catch_up",
        "payload_json": '{"a": [1, null]}',
        "job_version": 3,
        "job_definition": b"",
    }
    found = Delivery.from_run(record, attempt=2, deadline=30.0)
    assert found == Delivery(
        "acme/nightly@20250101T000000Z",
        "acme",
        "nightly",
        SCHEDULED_US,
        2,
        "catch_up",
        '{"a": [1, null]}',
        30.0,
    )
    assert found.payload == {"a": [1, None]}
    assert (
        Delivery.from_run({**record, "payload_json": None}, attempt=1, deadline=1).payload is None
    )


def test_iso_utc() -> None:
    assert iso_utc(SCHEDULED_US) == "2025-01-01T00:00:00Z"
    assert iso_utc(SCHEDULED_US + 1500) == "2025-01-01T00:00:00.001500Z"
    assert iso_utc(0) == "1970-01-01T00:00:00Z"


def test_the_envelope_is_compact_ascii_json_of_exactly_the_documented_fields() -> None:
    run = delivery(attempt=3)
    body = envelope_bytes(run)
    assert body.isascii() and b" " not in body
    assert list(json.loads(body)) == [
        "run_id",
        "tenant",
        "job_id",
        "scheduled_at",
        "attempt",
        "trigger",
        "payload",
    ]
    assert json.loads(body)["payload"]["name"] == "Zoë"
    odd = Delivery("a/b@x", "a", "b", 0, 1, "manual", compact({"s": "\ud800\u2028"}), 1.0)
    assert json.loads(envelope_bytes(odd))["payload"]["s"] == "\ud800\u2028"
    raw = Delivery("a/b@x", "a", "b", 0, 1, "manual", '{"s": "Zoë \u2028", "n": [1 ]}', 1.0)
    body = envelope_bytes(raw)  # non-ASCII text: encoded again, escaped
    assert body.isascii() and json.loads(body)["payload"] == {"s": "Zoë \u2028", "n": [1]}
    spliced = Delivery("a/b@x", "a", "b", 0, 1, "manual", '{"n": [1, 2]}', 1.0)
    assert envelope_bytes(spliced).endswith(b',"payload":{"n": [1, 2]}}')  # as it came
    none = Delivery("a/b@x", "a", "b", 0, 1, "manual", None, 1.0)
    assert json.loads(envelope_bytes(none))["payload"] is None


@pytest.mark.parametrize(
    "text", ["acme", "a\nb\t\x1f", 'q"\\/', "del\x7f", "Zoë", "\u2028", "lone\ud800"]
)
def test_the_envelope_head_is_the_same_text_whichever_encoder_writes_it(text: str) -> None:
    run = Delivery(f"{text}/j@x", text, "j", SCHEDULED_US, 2, "manual", None, 1.0)
    expected = compact({"run_id": f"{text}/j@x", "tenant": text, "job_id": "j",
                        "scheduled_at": iso_utc(SCHEDULED_US), "attempt": 2,
                        "trigger": "manual", "payload": None})  # fmt: skip
    assert envelope_bytes(run) == expected.encode("ascii")


def test_the_standard_webhooks_reference_vector() -> None:
    key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    found = signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert found == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_webhook_headers() -> None:
    body = b'{"x":1}'
    assert webhook_headers("r1", 17, body, None) == {
        "webhook-id": "r1",
        "webhook-timestamp": "17",
    }
    signed = webhook_headers("r1", 17, body, secret_key(SECRET))
    assert signed["webhook-signature"] == expected_signature(SECRET, "r1", "17", body)
    with pytest.raises(ValueError):
        secret_key("nope")


def test_kafka_record_is_keyed_by_run_id() -> None:
    run = delivery()
    clock = ManualClock(1_700_000_000_500_000)
    topic, key, value, headers = kafka_record(run, KafkaTargetConfig(topic="jobs.out"), clock=clock)
    assert topic == "jobs.out"
    assert key == run.run_id.encode()
    assert value == envelope_bytes(run)
    assert headers == [
        ("webhook-id", run.run_id.encode()),
        ("webhook-timestamp", b"1700000000"),
        ("content-type", b"application/json"),
    ]


def test_kafka_record_uses_the_targets_key() -> None:
    run = delivery()
    _, key, value, headers = kafka_record(run, KafkaTargetConfig(topic="t", key="tenant-7"))
    assert key == b"tenant-7"
    assert json.loads(value)["run_id"] == run.run_id
    assert dict(headers)["webhook-id"] == run.run_id.encode()
    assert kafka_record(run, KafkaTargetConfig(topic="t", key=""))[1] == b""

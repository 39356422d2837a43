"""SqsSender against a real ElasticMQ process (SQS JSON protocol on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from aiobotocore.session import get_session

from schedulerstream.clock import ManualClock
from schedulerstream.model import SqsTarget as SqsTargetConfig
from schedulerstream.sqs_regions import ENDPOINT_VARIABLES
from schedulerstream.targets import Outcome, Sender
from schedulerstream.targets.envelope import envelope
from schedulerstream.targets.sqs import SqsSender, deduplication_id, send_message_args
from tests.targets.helpers import delivery
from tests.targets.procs import ElasticMQ

REGION = "us-east-1"


async def _queue(name: str, fifo: bool) -> str:
    attributes: dict[Any, str] = {"FifoQueue": "true"} if fifo else {}
    async with get_session().create_client("sqs", region_name=REGION) as client:
        assert client.meta.endpoint_url.startswith("http://127.0.0.1:")  # never AWS itself
        answer = await client.create_queue(QueueName=name, Attributes=attributes)
        return answer["QueueUrl"]


async def _receive(queue_url: str) -> list[dict[str, Any]]:
    async with get_session().create_client("sqs", region_name=REGION) as client:
        answer = await client.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        )
        return [dict(message) for message in answer.get("Messages", [])]


async def _send(runs: list[Any], config: SqsTargetConfig, **options: Any) -> list[Outcome]:
    target = SqsSender(**options)
    try:
        return [await target.deliver(run, config) for run in runs]
    finally:
        await target.close()


def test_is_a_target() -> None:
    sender: Sender[SqsTargetConfig] = SqsSender()
    assert isinstance(sender, SqsSender)


def test_a_standard_queue_receives_the_envelope(aws_env: ElasticMQ) -> None:
    run = delivery()
    clock = ManualClock(1_700_000_000_000_000)

    async def go() -> tuple[list[Outcome], list[dict[str, Any]]]:
        url = await _queue(f"std-{uuid.uuid4().hex[:8]}", fifo=False)
        config = SqsTargetConfig(queue_url=url, region=REGION)
        return await _send([run], config, clock=clock), await _receive(url)

    [outcome], [message] = asyncio.run(go())
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("succeeded", 200, False)
    assert outcome.reason == f"SQS MessageId {message['MessageId']}"
    assert json.loads(message["Body"]) == envelope(run)
    attributes = message["MessageAttributes"]
    assert attributes["webhook-id"]["StringValue"] == run.run_id
    assert attributes["webhook-timestamp"]["StringValue"] == "1700000000"
    assert "MessageGroupId" not in message["Attributes"]


def test_a_fifo_queue_drops_a_second_send_of_the_same_run(aws_env: ElasticMQ) -> None:
    first = delivery(attempt=1)
    retry = delivery(attempt=2, run_id=first.run_id)
    other = delivery()

    async def go() -> tuple[list[Outcome], list[dict[str, Any]]]:
        url = await _queue(f"fifo-{uuid.uuid4().hex[:8]}.fifo", fifo=True)
        config = SqsTargetConfig(queue_url=url, region=REGION)
        return await _send([first, retry, other], config), await _receive(url)

    outcomes, messages = asyncio.run(go())
    assert [o.kind for o in outcomes] == ["succeeded"] * 3
    bodies = [json.loads(m["Body"]) for m in messages]
    assert sorted((b["run_id"], b["attempt"]) for b in bodies) == sorted(
        [(first.run_id, 1), (other.run_id, 1)]
    )
    by_run = {json.loads(m["Body"])["run_id"]: m["Attributes"] for m in messages}
    assert by_run[first.run_id]["MessageGroupId"] == f"acme/{first.job_id}"
    assert by_run[first.run_id]["MessageDeduplicationId"] == first.run_id


def test_a_fifo_queue_uses_the_jobs_message_group(aws_env: ElasticMQ) -> None:
    async def go() -> list[dict[str, Any]]:
        url = await _queue(f"grp-{uuid.uuid4().hex[:8]}.fifo", fifo=True)
        config = SqsTargetConfig(queue_url=url, region=REGION, message_group_id="billing")
        await _send([delivery()], config)
        return await _receive(url)

    [message] = asyncio.run(go())
    assert message["Attributes"]["MessageGroupId"] == "billing"


def test_a_missing_queue_is_a_final_failure_with_a_clear_reason(aws_env: ElasticMQ) -> None:
    url = f"{aws_env.endpoint}/000000000000/no-such-queue-{uuid.uuid4().hex[:6]}"
    config = SqsTargetConfig(queue_url=url, region=REGION)
    [outcome] = asyncio.run(_send([delivery()], config))
    assert (outcome.kind, outcome.retryable, outcome.status_code) == ("failed", False, 400)
    assert outcome.reason.startswith(f"SQS QueueDoesNotExist for {url}: ")
    assert "does not exist" in outcome.reason


def test_an_explicit_endpoint_overrides_the_environment(
    aws_env: ElasticMQ, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go() -> list[Outcome]:
        url = await _queue(f"ep-{uuid.uuid4().hex[:8]}", fifo=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9")  # discard port
        config = SqsTargetConfig(queue_url=url, region=REGION)
        return await _send([delivery()], config, endpoint_url=aws_env.endpoint)

    assert [o.kind for o in asyncio.run(go())] == ["succeeded"]


def test_an_unreachable_endpoint_is_retryable(aws_env: ElasticMQ) -> None:
    config = SqsTargetConfig(queue_url="http://127.0.0.1:9/000000000000/q", region=REGION)
    [outcome] = asyncio.run(_send([delivery()], config, endpoint_url="http://127.0.0.1:9"))
    assert (outcome.kind, outcome.retryable) == ("failed", True)
    assert "EndpointConnectionError" in outcome.reason


def test_missing_credentials_are_refused(
    aws_env: ElasticMQ, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    config = SqsTargetConfig(queue_url=f"{aws_env.endpoint}/000000000000/q", region=REGION)
    [outcome] = asyncio.run(_send([delivery()], config))
    assert (outcome.kind, outcome.retryable) == ("refused", False)
    assert "credentials" in outcome.reason


def test_deduplication_ids() -> None:
    run_id = "acme/nightly@20250101T000000Z~req-1:a.b"
    assert deduplication_id(run_id) == run_id
    long_id = "a" * 63 + "/" + "b" * 63 + "@manual-" + "c" * 128
    hashed = deduplication_id(long_id)
    assert len(hashed) == 64 and hashed == deduplication_id(long_id) and "@" not in hashed
    assert deduplication_id("has space@x") != "has space@x"


def test_send_message_args_only_give_fifo_queues_a_deduplication_id() -> None:
    run = delivery()
    standard = SqsTargetConfig(queue_url="http://127.0.0.1:1/0/q", region=REGION)
    fifo = SqsTargetConfig(queue_url="http://127.0.0.1:1/0/q.fifo", region=REGION)
    args = send_message_args(run, standard, 5)
    assert "MessageDeduplicationId" not in args and "MessageGroupId" not in args
    args = send_message_args(run, fifo, 5)
    assert args["MessageDeduplicationId"] == run.run_id
    assert args["MessageGroupId"] == f"acme/{run.job_id}"
    grouped = SqsTargetConfig(
        queue_url="http://127.0.0.1:1/0/q", region=REGION, message_group_id="g"
    )
    assert send_message_args(run, grouped, 5)["MessageGroupId"] == "g"


def test_a_region_botocore_does_not_know_is_refused_without_a_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ENDPOINT_VARIABLES:  # real AWS: no emulator endpoint
        monkeypatch.delenv(name, raising=False)
    fake = SqsTargetConfig(queue_url="https://sqs.zz-fake-9.amazonaws.com/0/q", region="zz-fake-9")

    async def go() -> tuple[Outcome, int]:
        target = SqsSender()
        try:
            outcome = await target.deliver(delivery(), fake)
            return outcome, len(target._clients)
        finally:
            await target.close()

    outcome, clients = asyncio.run(go())
    assert (outcome.kind, outcome.retryable, clients) == ("refused", False, 0)
    assert "'zz-fake-9' is not an SQS region" in outcome.reason


def test_clients_beyond_the_limit_are_closed_least_recently_used_first(
    aws_env: ElasticMQ,
) -> None:
    async def go() -> tuple[list[str], list[str]]:
        url = await _queue(f"lru-{uuid.uuid4().hex[:8]}", fifo=False)
        target = SqsSender(max_clients=2)
        try:
            kinds = []
            for region in ("us-east-1", "eu-west-1", "us-east-1", "any-name-9", "us-east-1"):
                config = SqsTargetConfig(queue_url=url, region=region)  # an emulator: any name
                kinds.append((await target.deliver(delivery(), config)).kind)
            return kinds, list(target._clients._open)
        finally:
            await target.close()

    kinds, kept = asyncio.run(go())
    assert kinds == ["succeeded"] * 5
    assert kept == ["any-name-9", "us-east-1"]  # eu-west-1 was the least recently used

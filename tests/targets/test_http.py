"""HttpSender against a real receiver process on loopback (allow_private=True)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import email.utils
import json
import time
from typing import Any
from urllib.parse import quote

import pytest

from harness.procs import ReceiverProcess
from schedulerstream.clock import ManualClock
from schedulerstream.model import HttpTarget as HttpTargetConfig
from schedulerstream.settings import Settings
from schedulerstream.targets import HttpSender, Outcome, Sender
from schedulerstream.targets.envelope import envelope
from schedulerstream.targets.http import parse_retry_after
from schedulerstream.targets.stall import LoopStallMonitor
from tests.targets.helpers import SECRET, delivery, expected_signature, http_config
from tests.targets.procs import free_port

T0_US = 1_700_000_000_000_000


def deliver_once(url: str, target: HttpSender | None = None, **fields: Any) -> Outcome:
    """One delivery of a fresh run to ``url`` with a private-allowed target."""

    async def go() -> Outcome:
        sender = target or HttpSender(allow_private=True)
        try:
            return await sender.deliver(delivery(), http_config(url, **fields))
        finally:
            await sender.close()

    return asyncio.run(go())


def wait_for(check: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_is_a_target() -> None:
    sender: Sender[HttpTargetConfig] = HttpSender()
    assert not HttpSender().allow_private
    assert HttpSender.from_settings(Settings(allow_private_targets=True)).allow_private
    assert isinstance(sender, HttpSender)


def test_success_sends_the_envelope_signed_with_standard_webhooks_headers(
    receiver: ReceiverProcess,
) -> None:
    run = delivery()
    config = http_config(
        receiver.url("/ok"),
        secret=SECRET,
        headers={"Authorization": "Bearer t0ken", "Content-Type": "text/plain"},
    )
    clock = ManualClock(T0_US)

    async def go() -> Outcome:
        target = HttpSender(allow_private=True, clock=clock)
        try:
            return await target.deliver(run, config)
        finally:
            await target.close()

    outcome = asyncio.run(go())
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("succeeded", 200, False)
    assert outcome.succeeded and outcome.reason == "HTTP 200: ok"
    [seen] = receiver.requests(run.run_id)
    body = base64.b64decode(seen["body_b64"])
    headers = seen["headers"]
    assert seen["method"] == "POST" and seen["path"] == "/ok"
    assert json.loads(body) == {
        "run_id": run.run_id,
        "tenant": "acme",
        "job_id": run.job_id,
        "scheduled_at": "2025-01-01T00:00:00Z",
        "attempt": 1,
        "trigger": "scheduled",
        "payload": {"report": "daily", "n": [1, 2, 3], "name": "Zoë"},
    }
    assert json.loads(body) == envelope(run)
    assert headers["webhook-id"] == run.run_id
    assert headers["webhook-timestamp"] == str(T0_US // 1_000_000)
    assert headers["webhook-signature"] == expected_signature(
        SECRET, run.run_id, headers["webhook-timestamp"], body
    )
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == "schedulerstream/0.1.0"
    assert headers["authorization"] == "Bearer t0ken"
    assert headers["content-length"] == str(len(body))


def test_no_secret_means_no_signature_and_the_job_method_is_used(
    receiver: ReceiverProcess,
) -> None:
    run = delivery()

    async def go() -> Outcome:
        target = HttpSender(allow_private=True)
        try:
            return await target.deliver(run, http_config(receiver.url("/ok"), method="PUT"))
        finally:
            await target.close()

    assert asyncio.run(go()).kind == "succeeded"
    [seen] = receiver.requests(run.run_id)
    assert seen["method"] == "PUT"
    assert "webhook-signature" not in seen["headers"]


def test_every_attempt_has_the_same_id_its_own_timestamp_and_a_valid_signature(
    receiver: ReceiverProcess,
) -> None:
    first = delivery()
    clock = ManualClock(T0_US)
    config = http_config(receiver.url("/fail-then-ok/2"), secret=SECRET)

    async def go() -> list[Outcome]:
        target = HttpSender(allow_private=True, clock=clock, breaker_threshold=None)
        outcomes = []
        try:
            for attempt in (1, 2, 3):
                run = delivery(attempt=attempt, run_id=first.run_id)
                outcomes.append(await target.deliver(run, config))
                clock.advance(7.5)
        finally:
            await target.close()
        return outcomes

    outcomes = asyncio.run(go())
    assert [(o.kind, o.status_code, o.retryable) for o in outcomes] == [
        ("failed", 503, True),
        ("failed", 503, True),
        ("succeeded", 200, False),
    ]
    assert outcomes[0].retry_after_s is None
    seen = receiver.requests(first.run_id)
    assert [r["headers"]["webhook-id"] for r in seen] == [first.run_id] * 3
    stamps = [int(r["headers"]["webhook-timestamp"]) for r in seen]
    assert stamps == [T0_US // 10**6, T0_US // 10**6 + 7, T0_US // 10**6 + 15]
    for number, request in enumerate(seen, start=1):
        body = base64.b64decode(request["body_b64"])
        assert json.loads(body)["attempt"] == number
        stamp = request["headers"]["webhook-timestamp"]
        sig = expected_signature(SECRET, first.run_id, stamp, body)
        assert request["headers"]["webhook-signature"] == sig


@pytest.mark.parametrize(
    ("path", "retryable"),
    [("/status/500", True), ("/status/502", True), ("/status/408", True), ("/status/599", True)],
)
def test_server_errors_and_408_are_retryable(
    receiver: ReceiverProcess, path: str, retryable: bool
) -> None:
    outcome = deliver_once(receiver.url(path + "?body=broken%20pipe"))
    assert outcome.kind == "failed" and outcome.retryable is retryable
    assert outcome.reason.endswith(": broken pipe")


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_client_errors_are_final(receiver: ReceiverProcess, code: int) -> None:
    outcome = deliver_once(receiver.url(f"/status/{code}?body=bad%20%20field%0Ax"))
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("failed", code, False)
    assert outcome.reason == f"HTTP {code}: bad field x"


def test_429_retry_after_in_seconds(receiver: ReceiverProcess) -> None:
    outcome = deliver_once(receiver.url("/429?after=7"))
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("failed", 429, True)
    assert outcome.retry_after_s == 7.0


@pytest.mark.parametrize("path", ["/429", "/503"])
def test_retry_after_as_an_http_date(receiver: ReceiverProcess, path: str) -> None:
    clock = ManualClock(T0_US)
    when = email.utils.formatdate(T0_US / 1e6 + 120, usegmt=True)
    target = HttpSender(allow_private=True, clock=clock)
    outcome = deliver_once(receiver.url(f"{path}?after={quote(when)}"), target)
    assert outcome.retryable and outcome.retry_after_s == 120.0


def test_parse_retry_after() -> None:
    now = T0_US
    assert parse_retry_after(None, now) is None
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after("30", now) == 30.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("-5", now) is None
    assert parse_retry_after("1.5", now) is None
    assert parse_retry_after("9" * 40, now) == 1e9
    past = email.utils.formatdate(T0_US / 1e6 - 60, usegmt=True)
    assert parse_retry_after(past, now) == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 * 10**6 - 10**6) == 1.0


def test_410_is_gone(receiver: ReceiverProcess) -> None:
    outcome = deliver_once(receiver.url("/gone"))
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("gone", 410, False)
    assert "removed" in outcome.reason


def test_redirects_are_failures_and_not_followed(receiver: ReceiverProcess) -> None:
    run = delivery()

    async def go() -> Outcome:
        target = HttpSender(allow_private=True)
        try:
            return await target.deliver(run, http_config(receiver.url("/redirect")))
        finally:
            await target.close()

    outcome = asyncio.run(go())
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("failed", 302, False)
    assert "redirect to /ok not followed" in outcome.reason
    assert [r["path"] for r in receiver.requests(run.run_id)] == ["/redirect"]


def test_a_hanging_receiver_times_out_within_the_deadline(receiver: ReceiverProcess) -> None:
    run = delivery(deadline=0.5)

    async def go() -> Outcome:
        target = HttpSender(allow_private=True)
        try:
            return await target.deliver(run, http_config(receiver.url("/hang")))
        finally:
            await target.close()

    started = time.monotonic()
    outcome = asyncio.run(go())
    elapsed = time.monotonic() - started
    assert (outcome.kind, outcome.retryable, outcome.status_code) == ("timed_out", True, None)
    assert 0.45 <= elapsed < 1.5, elapsed
    assert 450_000 <= outcome.duration_us < 1_500_000
    wait_for(lambda: [r for r in receiver.requests(run.run_id) if r["disconnected"]])


def test_cancelling_deliver_aborts_the_request(receiver: ReceiverProcess) -> None:
    run = delivery(deadline=30.0)
    config = http_config(receiver.url("/hang"))

    async def go() -> tuple[float, HttpSender]:
        target = HttpSender(allow_private=True)
        task = asyncio.create_task(target.deliver(run, config))
        for _ in range(200):
            if await asyncio.to_thread(receiver.requests, run.run_id):
                break
            await asyncio.sleep(0.02)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        elapsed = time.monotonic() - started
        await target.close()
        return elapsed, target

    elapsed, target = asyncio.run(go())
    assert elapsed < 0.5
    [seen] = wait_for(lambda: [r for r in receiver.requests(run.run_id) if r["disconnected"]])
    assert seen["path"] == "/hang"
    assert target.breaker("acme", f"127.0.0.1:{receiver.port}") is None  # no verdict from a cancel


def test_connection_refused_is_retryable() -> None:
    outcome = deliver_once(f"http://127.0.0.1:{free_port()}/ok")
    assert (outcome.kind, outcome.status_code, outcome.retryable) == ("failed", None, True)
    assert "cannot connect to 127.0.0.1" in outcome.reason


def test_the_response_body_is_read_up_to_a_cap(receiver: ReceiverProcess) -> None:
    outcome = deliver_once(receiver.url("/status/500?body=x&repeat=9000"))
    assert outcome.kind == "failed"
    assert outcome.reason == "HTTP 500: " + "x" * 4096
    assert deliver_once(receiver.url("/big/200000")).kind == "succeeded"


def test_slow_receivers_within_the_deadline_succeed(receiver: ReceiverProcess) -> None:
    outcome = deliver_once(receiver.url("/slow/200"))
    assert outcome.kind == "succeeded" and outcome.duration_us >= 190_000


def test_concurrent_deliveries_share_one_pool(receiver: ReceiverProcess) -> None:
    runs = [delivery() for _ in range(40)]

    async def go() -> list[Outcome]:
        target = HttpSender(allow_private=True, limit_per_host=8)
        try:
            config = http_config(receiver.url("/slow/50"))
            return await asyncio.gather(*(target.deliver(r, config) for r in runs))
        finally:
            await target.close()

    started = time.monotonic()
    outcomes = asyncio.run(go())
    assert all(o.kind == "succeeded" for o in outcomes)
    assert time.monotonic() - started >= 5 * 0.05  # 40 requests, 8 at a time, 50 ms each


def test_the_breaker_opens_for_a_failing_host_and_probes_after_the_cool_down(
    receiver: ReceiverProcess,
) -> None:
    clock = ManualClock(T0_US)
    host = f"127.0.0.1:{receiver.port}"
    blocked = delivery()

    async def go() -> list[Outcome]:
        target = HttpSender(
            allow_private=True, breaker_threshold=2, breaker_cool_down=10.0, clock=clock
        )
        failing = http_config(receiver.url("/status/500"))
        healthy = http_config(receiver.url("/ok"))
        try:
            found = [await target.deliver(delivery(), failing) for _ in range(2)]
            breaker = target.breaker("acme", host)
            assert breaker is not None and breaker.state == "open"
            found.append(await target.deliver(blocked, healthy))
            clock.advance(10.0)
            found.append(await target.deliver(delivery(), healthy))
            assert target.breaker("acme", host) is None
            return found
        finally:
            await target.close()

    outcomes = asyncio.run(go())
    assert [o.kind for o in outcomes] == ["failed", "failed", "failed", "succeeded"]
    refused = outcomes[2]
    assert refused.retryable and refused.retry_after_s == 10.0 and refused.status_code is None
    assert "circuit breaker open" in refused.reason
    assert receiver.requests(blocked.run_id) == []


def test_one_tenants_failures_on_a_host_do_not_open_the_breaker_for_another_tenant(
    receiver: ReceiverProcess,
) -> None:
    """Two tenants' URLs on one host: the first's path fails, the second's is healthy."""
    host = f"127.0.0.1:{receiver.port}"
    mine = delivery()
    other = dataclasses.replace(mine, tenant="beta", run_id=f"beta/{mine.job_id}@1")

    async def go() -> tuple[list[Outcome], Outcome, HttpSender]:
        target = HttpSender(allow_private=True, breaker_threshold=2)
        try:
            failing = http_config(receiver.url("/status/500"))
            found = [await target.deliver(delivery(), failing) for _ in range(3)]
            return found, await target.deliver(other, http_config(receiver.url("/ok"))), target
        finally:
            await target.close()

    failed, healthy, target = asyncio.run(go())
    assert [o.kind for o in failed] == ["failed"] * 3
    assert "circuit breaker open" in failed[2].reason  # acme's own breaker did open
    assert healthy.kind == "succeeded", healthy.reason
    assert target.breaker("beta", host) is None
    assert len(receiver.requests(other.run_id)) == 1


def test_client_errors_do_not_trip_the_breaker(receiver: ReceiverProcess) -> None:
    async def go() -> HttpSender:
        target = HttpSender(allow_private=True, breaker_threshold=1)
        try:
            for path in ("/status/404", "/429", "/gone"):
                await target.deliver(delivery(), http_config(receiver.url(path)))
        finally:
            await target.close()
        return target

    assert asyncio.run(go()).breaker("acme", f"127.0.0.1:{receiver.port}") is None


def test_sequential_deliveries_reuse_one_keep_alive_connection(receiver: ReceiverProcess) -> None:
    runs = [delivery() for _ in range(20)]

    async def go() -> None:
        target = HttpSender(allow_private=True)
        try:
            for run in runs:
                assert (await target.deliver(run, http_config(receiver.url("/ok")))).succeeded
        finally:
            await target.close()

    asyncio.run(go())
    peers = {tuple(receiver.requests(run.run_id)[0]["peer"]) for run in runs}
    assert len(peers) == 1


def test_a_timeout_across_a_stall_of_this_process_is_not_held_against_the_host(
    receiver: ReceiverProcess,
) -> None:
    """The dispatcher stopped (SIGSTOP, a VM pause) while a request waited: the deadline
    passes during the stall, which says nothing about the host, so its breaker stays shut;
    the same timeout without a stall counts."""

    async def go() -> tuple[Outcome, Outcome, HttpSender]:
        target = HttpSender(allow_private=True, breaker_threshold=1)
        url = receiver.url("/hang")
        stalled = asyncio.create_task(target.deliver(delivery(deadline=0.5), http_config(url)))
        await asyncio.sleep(0.2)
        time.sleep(1.5)  # the whole loop stops, as a stopped process does
        first = await stalled
        no_verdict = target.breaker("acme", f"127.0.0.1:{receiver.port}") is None
        second = await target.deliver(delivery(deadline=0.5), http_config(url))
        await target.close()
        assert no_verdict
        return first, second, target

    first, second, target = asyncio.run(go())
    assert first.kind == "timed_out" and "stalled" in first.reason
    assert second.kind == "timed_out" and "stalled" not in second.reason
    breaker = target.breaker("acme", f"127.0.0.1:{receiver.port}")
    assert breaker is not None and breaker.consecutive_failures == 1


def test_the_stall_monitor_sees_a_blocked_loop_and_only_then() -> None:
    async def go() -> tuple[bool, bool, bool]:
        monitor = LoopStallMonitor(interval_s=0.05, threshold_s=0.3)
        monitor.ensure_started()
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(0.4)
        calm = monitor.stalled_since(start)
        time.sleep(0.6)
        during = monitor.stalled_since(start)  # the ticker has not run yet
        await asyncio.sleep(0.1)
        after = monitor.stalled_since(start)
        await monitor.close()
        return calm, during, after

    assert asyncio.run(go()) == (False, True, True)


def test_a_redirect_to_a_location_that_is_not_utf8_gives_a_reason_an_event_can_carry() -> None:
    """aiohttp keeps a header's bad bytes as lone surrogates, which no UTF-8 encoder takes: the
    outcome's reason (and so the AttemptEvent of every run finished with it) must not."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9\xff\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def go() -> Outcome:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        sender = HttpSender(allow_private=True, breaker_threshold=None)
        try:
            return await sender.deliver(delivery(), http_config(f"http://127.0.0.1:{port}/x"))
        finally:
            await sender.close()
            server.close()
            await server.wait_closed()

    outcome = asyncio.run(go())
    assert outcome.kind == "failed" and outcome.status_code == 302
    assert outcome.reason == "HTTP 302: redirect to /caf\ufffd\ufffd not followed"
    outcome.reason.encode()  # what the AttemptEvent's encoder does

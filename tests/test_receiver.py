"""`schedulerstream receiver` verifies Standard Webhooks signatures as a real receiver must."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from aiohttp import web

from schedulerstream.cli.receiver_cmd import make_app, verify
from schedulerstream.targets.signing import secret_key, signature, webhook_headers

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = secret_key(SECRET)
BODY = json.dumps({"run_id": "acme/ping@20240310T120005Z", "attempt": 1,
                   "scheduled_at": "2024-03-10T12:00:05Z"}).encode()  # fmt: skip


def _headers(now: float, key: bytes = KEY, body: bytes = BODY) -> dict[str, str]:
    return webhook_headers("acme/ping@20240310T120005Z", int(now), body, key)


def test_a_signature_made_with_the_secret_passes() -> None:
    now = time.time()
    assert verify(KEY, _headers(now), BODY, now).text == "signature ok"


def test_several_signatures_pass_when_one_matches() -> None:
    now = time.time()
    headers = _headers(now)
    other = signature(b"another key", "acme/ping@20240310T120005Z", int(now), BODY)
    headers["webhook-signature"] = f"{other} {headers['webhook-signature']}"
    assert verify(KEY, headers, BODY, now).ok


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda h, now: h.update(_headers(now, key=b"wrong")), "no v1 signature matches"),
        (lambda h, now: h.update({"webhook-timestamp": str(int(now) - 301)}),
         "is 301 s old"),
        (lambda h, now: h.update({"webhook-timestamp": str(int(now) + 400)}),
         "400 s in the future"),
        (lambda h, now: h.update({"webhook-timestamp": "soon"}), "is not an integer"),
        (lambda h, now: h.pop("webhook-signature"), "missing header webhook-signature"),
        (lambda h, now: h.pop("webhook-id"), "missing header webhook-id"),
    ],
)  # fmt: skip
def test_a_wrong_stale_or_missing_signature_is_refused(change: object, reason: str) -> None:
    now = float(int(time.time()))  # whole seconds, as in the header
    headers = _headers(now)
    change(headers, now)  # type: ignore[operator]
    verdict = verify(KEY, headers, BODY, now)
    assert not verdict.ok and reason in verdict.text, verdict


def test_a_changed_body_is_refused() -> None:
    now = time.time()
    verdict = verify(KEY, _headers(now), BODY.replace(b"12:00:05", b"12:00:06"), now)
    assert not verdict.ok


def test_the_receiver_answers_200_signed_and_401_otherwise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def exchange() -> list[int]:
        runner = web.AppRunner(make_app(KEY, 200))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        statuses = []
        try:
            async with aiohttp.ClientSession() as session:
                for headers in (_headers(time.time()), {}):
                    async with session.post(f"http://127.0.0.1:{port}/hook", data=BODY,
                                            headers=headers) as response:  # fmt: skip
                        statuses.append(response.status)
        finally:
            await runner.cleanup()
        return statuses

    assert asyncio.run(exchange()) == [200, 401]
    out = capsys.readouterr().out
    assert "POST /hook acme/ping@20240310T120005Z attempt 1 (" in out
    assert ": signature ok; answered 200" in out
    assert ": signature refused: missing header webhook-id, webhook-timestamp, " in out
    assert "answered 401" in out

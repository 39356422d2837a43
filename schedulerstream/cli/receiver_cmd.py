"""``schedulerstream receiver``: a local webhook receiver to point jobs at while trying things.

It answers every request (any method, any path), prints one line per delivery (run id, attempt,
how late it arrived after its scheduled time, the signature check) and the body, and with
``--secret`` verifies the Standard Webhooks signature as a real receiver must: a missing,
stale or wrong signature is answered 401 and printed as refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime

import click
from aiohttp import web

from schedulerstream.targets.signing import secret_key, signature

TOLERANCE_S = 300  # Standard Webhooks: refuse a timestamp further than this from now
BODY_PREVIEW = 500


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str


def verify(
    key: bytes, headers: dict[str, str], body: bytes, now_s: float, tolerance_s: int = TOLERANCE_S
) -> Verdict:
    """Check ``webhook-signature`` (any of its space-separated ``v1,<base64>``) over
    ``{webhook-id}.{webhook-timestamp}.{body}`` and the timestamp's distance from now."""
    msg_id = headers.get("webhook-id")
    stamp = headers.get("webhook-timestamp")
    given = headers.get("webhook-signature")
    if not msg_id or not stamp or not given:
        names = ("webhook-id", "webhook-timestamp", "webhook-signature")
        missing = [name for name, v in zip(names, (msg_id, stamp, given), strict=True) if not v]
        return Verdict(False, f"signature refused: missing header {', '.join(missing)}")
    if not stamp.isdigit():
        return Verdict(False, f"signature refused: webhook-timestamp {stamp!r} is not an integer")
    timestamp = int(stamp)
    age = now_s - timestamp
    if abs(age) > tolerance_s:
        when = f"{age:.0f} s old" if age > 0 else f"{-age:.0f} s in the future"
        return Verdict(
            False, f"signature refused: webhook-timestamp is {when} (tolerance {tolerance_s} s)"
        )
    expected = signature(key, msg_id, timestamp, body)
    for candidate in given.split():
        if hmac.compare_digest(candidate.encode(), expected.encode()):
            return Verdict(True, "signature ok")
    return Verdict(False, "signature refused: no v1 signature matches the secret")


def _lateness(envelope: object, now_s: float) -> str:
    if not isinstance(envelope, dict) or not isinstance(envelope.get("scheduled_at"), str):
        return ""
    try:
        scheduled = datetime.fromisoformat(envelope["scheduled_at"].replace("Z", "+00:00"))
    except ValueError:
        return ""
    return f" ({now_s - scheduled.timestamp():.2f} s after its scheduled time)"


def _say(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()


def make_app(key: bytes | None, status: int) -> web.Application:
    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            envelope: object = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            envelope = None
        what = "(not a schedulerstream envelope)"
        if isinstance(envelope, dict) and "run_id" in envelope:
            what = f"{envelope['run_id']} attempt {envelope.get('attempt')}"
        if key is None:
            verdict = Verdict(True, "signature not checked (no --secret)")
        else:
            verdict = verify(key, headers, body, now)
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
        answer = status if verdict.ok else 401
        _say(
            f"{stamp} {request.method} {request.path_qs} {what}{_lateness(envelope, now)}: "
            f"{verdict.text}; answered {answer}"
        )
        text = body.decode("utf-8", "replace")
        _say(f"  {text[:BODY_PREVIEW]}{'…' if len(text) > BODY_PREVIEW else ''}")
        if not verdict.ok:
            return web.Response(status=401, text=verdict.text + "\n")
        return web.Response(status=status, text="received\n")

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", receive)
    return app


async def _serve(host: str, port: int, key: bytes | None, status: int) -> None:
    runner = web.AppRunner(make_app(key, status), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        bound = server.sockets[0].getsockname()[1]
    check = "checking signatures with the given secret" if key else "not checking signatures"
    _say(f"receiver ready: http://{host}:{bound}/ (any path; {check}; Ctrl-C to stop)")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        _say("receiver stopped")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=9000, show_default=True)
@click.option(
    "--secret",
    default=None,
    metavar="whsec_...",
    help="The job's webhook secret: verify signatures, answer 401 when wrong.",
)
@click.option(
    "--status",
    type=click.IntRange(100, 599),
    default=200,
    show_default=True,
    help="Status to answer (500 to watch retries, 410 to pause the job).",
)
def receiver(host: str, port: int, secret: str | None, status: int) -> None:
    """A local webhook receiver: prints every delivery and checks its signature."""
    key = None
    if secret is not None:
        try:
            key = secret_key(secret)
        except ValueError as exc:  # no whsec_ prefix, or not base64
            raise click.BadParameter(f"{exc}", param_hint="--secret") from None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(host, port, key, status))

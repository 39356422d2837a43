"""A webhook receiver for tests and benches, run in its own process:

    python harness/webhook_receiver.py --port N   (0: any free port; prints "listening on PORT")

Behaviour by path (any method): /ok, /fail-then-ok/<n> (503 n times per webhook-id, then 200),
/429?after=<Retry-After value> (default "2"), /503?after=<value>, /hang (never answers),
/gone (410), /redirect (302 to /ok), /slow/<ms>, /status/<code>?body=<text>&repeat=<n> (that
status, the text n times), /big/<bytes> (200 with a body of that size).

Every request is recorded (method, path, headers, base64 body, the client's address, when it
came and was answered, whether the client went away before an answer) and listed by GET
/_requests; DELETE /_requests forgets them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import signal
import sys
import time
from collections import Counter
from typing import Any

from aiohttp import web

Record = dict[str, Any]


class Receiver:
    def __init__(self, record: bool) -> None:
        self.record = record
        self.requests: list[Record] = []
        self.failures: Counter[str] = Counter()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/_requests":
            if request.method == "DELETE":
                self.requests.clear()
                self.failures.clear()
                return web.json_response({"cleared": True})
            return web.json_response(self.requests)
        body = await request.read()
        transport = request.transport
        entry: Record = {
            "method": request.method,
            "path": request.path,
            "query": request.query_string,
            "headers": [[k, v] for k, v in request.headers.items()],
            "body_b64": base64.b64encode(body).decode(),
            "received_at": time.time(),
            "peer": list(transport.get_extra_info("peername") or []) if transport else [],
            "disconnected": False,
        }
        if self.record:
            self.requests.append(entry)
        try:
            response = await self.answer(request, entry)
        except asyncio.CancelledError:
            entry["disconnected"] = True
            raise
        entry["answered_at"] = time.time()
        return response

    async def answer(self, request: web.Request, entry: Record) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        name, arg = parts[0], (parts[1] if len(parts) > 1 else "")
        after = request.query.get("after", "2")
        if name == "ok":
            return web.Response(text="ok")
        if name == "fail-then-ok":
            webhook_id = request.headers.get("webhook-id", "")
            if self.failures[webhook_id] < int(arg):
                self.failures[webhook_id] += 1
                return web.Response(status=503, text="try again")
            return web.Response(text="ok")
        if name in ("429", "503"):
            return web.Response(status=int(name), text="slow down", headers={"Retry-After": after})
        if name == "hang":
            await asyncio.Event().wait()
        if name == "gone":
            return web.Response(status=410, text="this endpoint was removed")
        if name == "redirect":
            return web.Response(status=302, headers={"Location": "/ok"})
        if name == "slow":
            await asyncio.sleep(int(arg) / 1000)
            return web.Response(text="ok")
        if name == "status":
            text = request.query.get("body", "") * int(request.query.get("repeat", "1"))
            return web.Response(status=int(arg), text=text)
        if name == "big":
            return web.Response(body=b"x" * int(arg))
        return web.Response(status=404, text=f"no behaviour {name!r}")


async def serve(host: str, port: int, record: bool) -> None:
    receiver = Receiver(record)
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"listening on {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description="webhook receiver for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--no-record", action="store_true", help="keep no request records")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, not args.no_record))
    sys.exit(0)


if __name__ == "__main__":
    main()

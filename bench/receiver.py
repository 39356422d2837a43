"""The benches' webhook receiver, a real aiohttp server in its own process:

    python bench/receiver.py [--port 0]     (prints "listening on PORT" when it accepts)

Any POST answers 200 and is recorded as ``[arrival µs, run id, tenant, scheduled_at µs,
attempt]``: the arrival is this process's wall clock when the request body has been read;
the run id, tenant, scheduled instant and attempt come from the webhook's JSON envelope (the
``webhook-id`` header when the body has no ``run_id``). ``GET /_records?from=N`` answers
``{"total": T, "records": [...]}`` with the records from index N on; ``DELETE /_records``
forgets them; ``GET /_count`` answers the number recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from datetime import datetime
from functools import lru_cache

from aiohttp import web

Record = tuple[int, str, str, int, int]


@lru_cache(maxsize=65536)
def instant_us(text: str) -> int:
    """µs since the epoch of an ISO 8601 instant (``Z`` or an offset)."""
    moment = datetime.fromisoformat(text)
    return (
        int(moment.timestamp()) * 1_000_000 + moment.microsecond
        if moment.tzinfo is not None
        else -1
    )


class Receiver:
    def __init__(self) -> None:
        self.records: list[Record] = []

    async def hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        arrival = time.time_ns() // 1000
        try:
            data = json.loads(body)
            record: Record = (
                arrival,
                data.get("run_id") or request.headers.get("webhook-id", ""),
                data.get("tenant", ""),
                instant_us(data["scheduled_at"]) if data.get("scheduled_at") else -1,
                int(data.get("attempt", 0)),
            )
        except (ValueError, TypeError, AttributeError):
            record = (arrival, request.headers.get("webhook-id", ""), "", -1, 0)
        self.records.append(record)
        return web.Response(text="ok")

    async def listing(self, request: web.Request) -> web.Response:
        if request.method == "DELETE":
            self.records.clear()
            return web.json_response({"cleared": True})
        start = int(request.query.get("from", "0"))
        return web.json_response({"total": len(self.records), "records": self.records[start:]})

    async def count(self, request: web.Request) -> web.Response:
        return web.json_response({"total": len(self.records)})


async def serve(host: str, port: int) -> None:
    receiver = Receiver()
    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_route("*", "/_records", receiver.listing)
    app.router.add_get("/_count", receiver.count)
    app.router.add_route("*", "/{tail:.*}", receiver.hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    print(f"listening on {runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description="the benches' recording webhook receiver")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()

"""Run handlers off the consumer loop: sync ones on their own daemon thread, async ones on one
event loop thread. Both give a ``concurrent.futures.Future``; ``cancel`` sets the job's
``cancelled`` event and cancels an async handler's task."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from schedulerstream.worker.app import Handler, Job, WorkerApp


class Execution:
    """Starts handlers; the loop thread for async ones is started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, handler: Handler, job: Job) -> Future[Any]:
        if WorkerApp.is_async(handler):
            return asyncio.run_coroutine_threadsafe(handler(job), self._event_loop())
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(handler(job))
            except BaseException as exc:  # reported as the attempt's failure
                future.set_exception(exc)

        # daemon: a handler that ignores its cancellation cannot keep the process alive
        threading.Thread(target=run, name=f"job {job.run_id}", daemon=True).start()
        return future

    @staticmethod
    def cancel(job: Job, future: Future[Any]) -> None:
        job.cancelled.set()
        future.cancel()  # an async handler's task is cancelled; a running thread is not

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="handlers",
                                            daemon=True)  # fmt: skip
            self._thread.start()
            self._loop = loop
        return self._loop

"""The WorkerApp of the worker tests (in-process and ``schedulerstream worker`` processes).

Payload: ``marker`` (a directory: ``{run}.{attempt}.{started|cancelled|done}`` files are
written there), ``sleep`` (seconds, every attempt), ``sleep_first`` (seconds, attempt 1 only),
``fail`` (a JobFailed reason).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from schedulerstream.worker import Job, JobFailed, WorkerApp

app = WorkerApp()


def marker(job: Job, event: str) -> None:
    payload: Any = job.payload
    if isinstance(payload, dict) and payload.get("marker"):
        name = f"{job.run_id.replace('/', '_')}.{job.attempt}.{event}"
        (Path(payload["marker"]) / name).write_text(job.run_id)


def seconds(job: Job) -> float:
    payload: Any = job.payload if isinstance(job.payload, dict) else {}
    first = payload.get("sleep_first", 0) if job.attempt == 1 else 0
    return float(payload.get("sleep", 0)) + float(first)


@app.handler
def default(job: Job) -> str:
    marker(job, "started")
    if job.cancelled.wait(seconds(job)):  # a sync handler checks (here: waits on) the event
        marker(job, "cancelled")
        return "stopped"
    if isinstance(job.payload, dict) and job.payload.get("fail"):
        raise JobFailed(str(job.payload["fail"]), retryable=False)
    marker(job, "done")
    return f"done in {job.attempt}"


@app.handler(job="async-job")
async def async_job(job: Job) -> str:
    marker(job, "started")
    try:
        await asyncio.sleep(seconds(job))
    except asyncio.CancelledError:
        marker(job, "cancelled")
        raise
    return "async done"


def started(directory: Path, run_id: str, attempt: int, event: str = "started") -> bool:
    return (directory / f"{run_id.replace('/', '_')}.{attempt}.{event}").exists()

"""The worker SDK: run jobs whose target is ``{"type": "worker", "pool": P}``.

    from schedulerstream.worker import Job, JobFailed, WorkerApp

    app = WorkerApp()

    @app.handler(job="nightly-report")
    def report(job: Job) -> str:
        for chunk in work(job.payload):
            if job.is_cancelled():
                return "stopped"
        return "done"

Run it with ``schedulerstream worker --pool P --app module:app`` (or ``WorkerRunner``).
"""

from schedulerstream.worker.app import Handler, Job, JobFailed, WorkerApp
from schedulerstream.worker.runner import WorkerRunner

__all__ = ["Handler", "Job", "JobFailed", "WorkerApp", "WorkerRunner"]

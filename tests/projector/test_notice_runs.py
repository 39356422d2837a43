"""Notification runs in the read model (issue #16): their ids are accepted, their trigger reads
"notification", they are listed among the job's runs but never become its last run; the
notify target's webhook secret is redacted like the target's."""

from __future__ import annotations

from schedulerstream.model import JobDefinition
from schedulerstream.projector.jobstate import REDACTED, public_definition
from schedulerstream.projector.runstate import run_id_suffix_ok, trigger_of_run_id
from tests.projector.memory import Driver
from tests.projector.records import T0, attempt, job_avro, job_json, run_id, triggered

JOB = "acme/backup"
SECRET = "whsec_" + "A" * 24


def test_notification_ids_are_run_ids_with_their_own_trigger() -> None:
    for suffix in ("20260308T070000Z!dead_lettered", "manual-r1!dead_lettered",
                   "20260308T070000Z~r1!dead_lettered", "v8!paused"):  # fmt: skip
        assert run_id_suffix_ok(suffix), suffix
        assert trigger_of_run_id(f"acme/j@{suffix}") == "notification"
    for suffix in ("v8!dead_lettered", "20260308T070000Z!paused", "x!paused", "v8!", "!paused"):
        assert not run_id_suffix_ok(suffix), suffix


def test_a_notification_is_listed_but_is_never_the_jobs_last_run() -> None:
    driver = Driver()
    driver.schedule(JOB, job_avro("acme", "backup", 1), T0 - 1)
    rid = run_id(JOB, T0)
    notice = f"{rid}!dead_lettered"
    driver.event(triggered(rid, T0))
    driver.event(attempt(rid, "dead_lettered", 1, T0 + 10, reason="1 attempts"))
    driver.event(attempt(notice, "accepted", 0, T0 + 10))
    driver.event(attempt(notice, "succeeded", 1, T0 + 20))
    assert (driver.runs[notice].trigger, driver.runs[notice].status) == (
        "notification", "succeeded",
    )  # fmt: skip
    job = driver.jobs[("acme", "backup")]
    assert (job.last_run_id, job.last_run_status) == (rid, "dead_lettered")


def test_the_notify_targets_secret_is_redacted() -> None:
    hook = {"type": "http", "url": "https://alerts.example.com/", "secret": SECRET}
    job = JobDefinition.model_validate(
        {**job_json("acme", "backup"), "notify": {"on": ["paused"], "target": hook}}
    )
    assert public_definition(job)["notify"]["target"]["secret"] == REDACTED


def test_the_schedulers_missed_events_about_a_job_are_listed_as_its_runs() -> None:
    """``{job}@never`` (no instant after it was created) and ``{job}@stopped`` (it can be
    neither run nor paused): rejected as bad run ids before, so the read model never showed
    them."""
    assert run_id_suffix_ok("never") and run_id_suffix_ok("stopped")
    assert not run_id_suffix_ok("stopped!paused") and not run_id_suffix_ok("neverland")
    driver = Driver()
    driver.schedule(JOB, job_avro("acme", "backup", 1), T0 - 1)
    for suffix in ("never", "stopped"):
        rid = f"{JOB}@{suffix}"
        driver.event(attempt(rid, "missed", 0, T0, reason=f"the job {suffix}", count=0))
        assert (driver.runs[rid].status, driver.runs[rid].last_error) == (
            "skipped", f"the job {suffix}",
        )  # fmt: skip

"""The web console in a real headless Chromium against a real stack: sign in, jobs and their
next instants, runs against a real receiver, pause with a reason, trigger, cancel in flight,
backfill with confirmation, delete, a refused key, another tenant's job out of reach, the
operator's view and the overview. Each page is photographed at 1280 px and a phone's width."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.helpers import auth
from tests.ui.conftest import OPERATOR_KEY, Stack, shoot

pytestmark = pytest.mark.kafka
RUN_TIMEOUT = 60_000  # ms: processors start with the module; the first run waits for them


def put_job(stack: Stack, tenant: str, job_id: str, **fields: Any) -> None:
    body = {"target": {"type": "http", "url": stack.receiver.url("/ok")}, **fields}
    answer = httpx.put(
        f"{stack.url}/v1/jobs/{job_id}", json=body, headers=auth(stack.keys[tenant]), timeout=10
    )
    assert answer.status_code == 200, answer.text


def sign_in(page: Page, stack: Stack, key: str) -> None:
    page.goto(f"{stack.url}/ui")
    field = page.get_by_label("API key")
    expect(field).to_have_attribute("type", "password")
    field.fill(key)
    field.press("Enter")
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert key not in page.url


def open_job(page: Page, stack: Stack, tenant: str, job_id: str) -> None:
    page.goto(f"{stack.url}/ui/jobs/{tenant}/{job_id}")
    expect(page.get_by_role("heading", name=job_id, exact=True)).to_be_visible()


def runs_table(page: Page) -> Any:
    return page.locator("#runs")


def test_a_bad_key_is_refused(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.url}/ui")
    expect(page.get_by_role("heading", name="schedulerstream console")).to_be_visible()
    shoot(page, "signin")
    page.get_by_label("API key").fill("ss_acme_" + "0" * 64)
    page.get_by_label("API key").press("Enter")
    expect(page.get_by_role("alert")).to_have_text("That key was refused.")
    expect(page.get_by_role("heading", name="Jobs")).to_have_count(0)
    assert "ss_acme" not in page.url and page.url.endswith("/ui")


def test_a_job_with_its_next_instants_and_a_run_that_succeeds(page: Page, stack: Stack) -> None:
    put_job(stack, "acme", "march-sundays",
            schedule={"cron": "30 2 * 3 0", "timezone": "Europe/Berlin"})  # fmt: skip
    put_job(stack, "acme", "tick", schedule={"every": 2})
    sign_in(page, stack, stack.keys["acme"])
    jobs = page.locator("#jobs")
    expect(jobs.get_by_role("link", name="tick")).to_be_visible()
    expect(jobs.get_by_role("link", name="march-sundays")).to_be_visible()
    expect(jobs).to_contain_text("Europe/Berlin")
    page.get_by_label("Search job ids").fill("march")
    expect(jobs.get_by_role("link", name="tick")).to_have_count(0)
    expect(jobs.get_by_role("link", name="march-sundays")).to_be_visible()
    jobs.get_by_role("link", name="march-sundays").click()
    upcoming = page.locator("#upcoming tbody tr")
    expect(upcoming).to_have_count(20)
    expect(upcoming.first).to_contain_text("(Europe/Berlin)")
    expect(upcoming.first).to_contain_text("02:30:00")
    # the last Sunday of March at 02:30 does not exist in Berlin: the note of `cron next`
    expect(page.locator("#upcoming")).to_contain_text("does not exist (DST gap)")
    expect(page.locator("#definition")).to_contain_text('"cron": "30 2 * 3 0"')
    shoot(page, "job")

    page.get_by_role("link", name="Jobs", exact=True).first.click()
    page.get_by_label("Search job ids").fill("")
    last_run = page.locator("#jobs tbody tr", has_text="tick").locator("td[data-label='Last run']")
    expect(last_run.get_by_role("link")).to_be_visible(timeout=RUN_TIMEOUT)  # updates by itself
    shoot(page, "jobs")
    page.locator("#jobs").get_by_role("link", name="tick").click()
    succeeded = runs_table(page).locator("tr", has=page.locator(".badge", has_text="succeeded"))
    expect(succeeded.first).to_be_visible(timeout=RUN_TIMEOUT)
    succeeded.first.get_by_role("link").click()
    expect(page.locator("#run-status")).to_have_text("succeeded")
    attempts = page.locator("#attempts")
    expect(attempts.locator(".badge", has_text="succeeded")).to_be_visible()
    expect(attempts.locator("td[data-label='HTTP status']").last).to_have_text("200")
    shoot(page, "run")


def test_pause_with_a_reason_trigger_resume_and_delete(page: Page, stack: Stack) -> None:
    put_job(stack, "acme", "report", schedule={"every": 3600})
    sign_in(page, stack, stack.keys["acme"])
    open_job(page, stack, "acme", "report")
    page.get_by_label("Reason for pausing").fill("receiver maintenance until 14:00")
    page.get_by_label("Reason for pausing").press("Enter")
    expect(page.locator("#job-status .badge")).to_have_text("paused")
    expect(page.locator("#paused-reason")).to_have_text("receiver maintenance until 14:00")
    expect(page.locator("#upcoming")).to_contain_text("will not fire until resumed")

    page.get_by_role("button", name="Trigger now").click()
    result = page.locator("#action-result")
    expect(result).to_contain_text("acme/report@manual-")
    manual = runs_table(page).locator("tr", has_text="manual")
    expect(manual.locator(".badge")).to_have_text("succeeded", timeout=RUN_TIMEOUT)

    page.goto(f"{stack.url}/ui/jobs")
    page.get_by_label("Status").select_option("paused")
    row = page.locator("#jobs tbody tr", has_text="report")
    expect(row).to_contain_text("receiver maintenance until 14:00")
    expect(page.locator("#jobs").get_by_role("link", name="tick")).to_have_count(0)

    open_job(page, stack, "acme", "report")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#job-status .badge")).to_have_text("active")
    expect(page.locator("#paused-reason")).to_have_count(0)

    page.get_by_role("button", name="Delete…").click()
    confirm = page.locator("#delete-confirm")
    expect(confirm).to_contain_text("Delete job report?")
    page.get_by_role("button", name="Keep it").click()
    expect(confirm).to_be_empty()
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Delete report").click()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    answer = httpx.get(f"{stack.url}/v1/jobs/report", headers=auth(stack.keys["acme"]))
    assert answer.status_code == 404


def test_cancel_a_run_in_flight_against_a_hanging_receiver(page: Page, stack: Stack) -> None:
    put_job(stack, "acme", "stuck", schedule={"every": 86400}, timeout=300,
            target={"type": "http", "url": stack.receiver.url("/hang")})  # fmt: skip
    sign_in(page, stack, stack.keys["acme"])
    open_job(page, stack, "acme", "stuck")
    page.get_by_role("button", name="Trigger now").click()
    page.locator("#action-result").get_by_role("link").click()
    expect(page.locator("#run-status")).to_have_text("running", timeout=RUN_TIMEOUT)
    shoot(page, "run-in-flight")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=30_000)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    hung = [r for r in stack.receiver.requests() if r["path"] == "/hang"]
    assert hung, "the receiver never saw the request"


def test_backfill_shows_its_size_and_asks_first(page: Page, stack: Stack) -> None:
    put_job(stack, "acme", "hourly", schedule={"cron": "0 * * * *"})
    sign_in(page, stack, stack.keys["acme"])
    open_job(page, stack, "acme", "hourly")
    end = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
    start = end - timedelta(hours=3)
    page.get_by_label("Backfill from (UTC)").fill(start.strftime("%Y-%m-%dT%H:%M"))
    page.get_by_label("until (UTC)").fill(end.strftime("%Y-%m-%dT%H:%M"))
    page.get_by_role("button", name="Backfill…").click()
    confirm = page.locator("#bf-confirm")
    expect(confirm).to_contain_text("This backfill will create 3 runs")
    shoot(page, "job-backfill-confirm")
    page.get_by_role("button", name="Create 3 runs").click()
    expect(page.locator("#action-result")).to_have_text("Backfill requested: 3 runs.")
    backfilled = runs_table(page).locator("tbody tr", has_text="backfill")
    expect(backfilled).to_have_count(3, timeout=RUN_TIMEOUT)


def test_another_tenants_job_is_not_reachable_by_url(page: Page, stack: Stack) -> None:
    put_job(stack, "globex", "payroll", schedule={"every": 3600})
    trigger = httpx.post(f"{stack.url}/v1/jobs/payroll/trigger", json={},
                         headers=auth(stack.keys["globex"]))  # fmt: skip
    run_id = trigger.json()["run_id"]
    sign_in(page, stack, stack.keys["acme"])
    expect(page.locator("#jobs").get_by_role("link", name="payroll")).to_have_count(0)
    for path in ("/ui/jobs/globex/payroll", "/ui/jobs/acme/payroll"):
        page.goto(f"{stack.url}{path}")
        expect(page.get_by_role("alert")).to_have_text("Not found (or not yours to see).")
        expect(page.locator("#definition")).to_be_empty()
        expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    page.goto(f"{stack.url}/ui/runs/{quote(run_id, safe='')}")
    expect(page.get_by_role("alert")).to_have_text("Not found (or not yours to see).")
    expect(page.locator("#run-status")).to_have_count(0)


def test_the_operator_sees_every_tenant_read_only(page: Page, stack: Stack) -> None:
    put_job(stack, "globex", "ledger", schedule={"every": 3600})
    sign_in(page, stack, OPERATOR_KEY)
    expect(page.locator(".who")).to_have_text("Operator (all tenants, read-only)")
    jobs = page.locator("#jobs")
    expect(jobs.get_by_role("link", name="ledger")).to_be_visible()
    expect(jobs.get_by_role("link", name="tick")).to_be_visible()
    page.get_by_label("Tenant").select_option("globex")
    expect(jobs.get_by_role("link", name="tick")).to_have_count(0)
    jobs.get_by_role("link", name="ledger").click()
    expect(page.locator("#upcoming tbody tr")).to_have_count(20)
    expect(page.get_by_text("Read-only: the operator key cannot change jobs")).to_be_visible()
    expect(page.get_by_role("button", name="Trigger now")).to_have_count(0)


def test_the_overview_charts_the_last_hour(page: Page, stack: Stack) -> None:
    put_job(stack, "acme", "flaky", schedule={"every": 2}, retry={"max_attempts": 1},
            target={"type": "http", "url": stack.receiver.url("/status/500")})  # fmt: skip
    hung = httpx.post(f"{stack.url}/v1/jobs/stuck/trigger", json={},
                      headers=auth(stack.keys["acme"])).json()["run_id"]  # fmt: skip
    sign_in(page, stack, OPERATOR_KEY)
    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    chart = page.get_by_role("img", name=re.compile("Runs per minute by outcome"))
    expect(chart.locator("rect.f-succeeded").first).to_be_attached(timeout=RUN_TIMEOUT)
    expect(page.locator("svg.chart-lateness polyline.l-p50")).to_be_attached()
    failing = page.locator("#failing")
    expect(failing.get_by_role("link", name="acme / flaky")).to_be_visible(timeout=RUN_TIMEOUT)
    # tick and flaky run every 2 s, as often as the page polls: a poll can see their runs in
    # flight at every refresh. Without them, the hung run is all that is in flight.
    for job_id in ("flaky", "tick"):
        gone = httpx.delete(f"{stack.url}/v1/jobs/{job_id}", headers=auth(stack.keys["acme"]))
        assert gone.is_success, gone.text
    queue = page.locator("#queue tbody tr", has_text="acme")
    expect(queue.locator("td[data-label='In flight']")).to_have_text("1", timeout=RUN_TIMEOUT)
    page.get_by_text("The same as a table").click()
    expect(page.locator("#charts table")).to_contain_text("succeeded")
    shoot(page, "overview")
    httpx.post(
        f"{stack.url}/v1/runs/{quote(hung, safe='')}/cancel", headers=auth(stack.keys["acme"])
    )

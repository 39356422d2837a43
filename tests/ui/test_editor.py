"""The console's job form in a real headless Chromium against the shared stack: create a job
through the form with its live preview, field errors from the API shown at their field, a run
that succeeds against the real receiver, edit with If-Match (and a conflict), fields the form does
not show kept, the webhook secret asked for again, and the JSON tab."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.api.helpers import auth
from tests.ui.conftest import SCREENSHOTS, Stack, shoot
from tests.ui.test_console import RUN_TIMEOUT, open_job, put_job, sign_in

pytestmark = pytest.mark.kafka
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123").decode()


def received(stack: Stack, text: str) -> list[dict[str, Any]]:
    bodies = [(r, base64.b64decode(r["body_b64"]).decode()) for r in stack.receiver.requests()]
    return [r for r, body in bodies if text in body]


def get_job(stack: Stack, job_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{stack.url}/v1/jobs/{job_id}", headers=auth(stack.keys["acme"]))
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] = answer.json()
    return job


def test_create_a_job_in_the_form_with_its_preview_and_field_errors(
    page: Page, stack: Stack
) -> None:
    sign_in(page, stack, stack.keys["acme"])
    page.get_by_role("link", name="New job").click()
    expect(page.get_by_role("heading", name="New job", exact=True)).to_be_visible()
    cron, zone = page.get_by_label("Cron expressions"), page.get_by_label("Time zone")
    expect(zone).to_have_value("America/New_York")  # the browser's zone by default
    preview = page.locator("#preview")
    expect(preview.locator("tbody tr")).to_have_count(5)

    zone.fill("Europe/Berlin")
    cron.fill("30 2 * 3 0")  # the last Sunday of March at 02:30 does not exist in Berlin
    expect(preview).to_contain_text("does not exist (DST gap)")
    expect(preview.locator("tbody tr").first).to_contain_text("(Europe/Berlin)")

    cron.fill("61 * * * *")  # named at the field while typing (the preview's 422)
    expect(page.locator("#f-cron-error")).to_have_text("minute: '61' is out of range 0-59")
    expect(cron).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Job id").fill("form-job")
    page.get_by_label("URL", exact=True).fill("not a url")
    page.get_by_role("button", name="Create job").click()
    summary = page.locator("#form-errors")
    expect(summary).to_contain_text("Not saved: fix these 2 problems.")
    expect(page.locator("#f-cron-error")).to_contain_text("minute: '61' is out of range 0-59")
    bad_url = "'not a url' is not an http(s) URL with a host"
    expect(page.locator("#f-url-error")).to_have_text(bad_url)
    assert page.url.endswith("/ui/new")
    summary.get_by_role("link", name=f"URL: {bad_url}").click()
    expect(page.get_by_label("URL", exact=True)).to_be_focused()
    shoot(page, "job-form-errors")

    cron.fill("*/2 * * * * *")  # six fields: seconds first
    page.get_by_label("Dates without runs").fill("2030-12-25")
    page.get_by_label("URL", exact=True).fill(stack.receiver.url("/ok"))
    page.get_by_label("Payload (JSON)").fill('{"from": "the form"}')
    expect(page.locator("#f-cron-error")).to_be_empty()
    expect(preview.locator("tbody tr")).to_have_count(5)
    shoot(page, "job-form")
    when = page.locator("#panel-form fieldset.group").first  # the schedule and its preview
    when.screenshot(path=str(SCREENSHOTS / "job-form-when-desktop.png"))
    page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="form-job", exact=True)).to_be_visible()
    definition = page.locator("#definition")
    expect(definition).to_contain_text('"cron": "*/2 * * * * *"')
    expect(definition).to_contain_text('"2030-12-25"')
    expect(definition).to_contain_text('"timezone": "Europe/Berlin"')
    succeeded = page.locator("#runs tr", has=page.locator(".badge", has_text="succeeded"))
    expect(succeeded.first).to_be_visible(timeout=RUN_TIMEOUT)
    assert received(stack, "the form"), "the receiver never got the form's payload"
    httpx.delete(f"{stack.url}/v1/jobs/form-job", headers=auth(stack.keys["acme"]))


def test_edit_keeps_what_the_form_does_not_show_and_sends_if_match(
    page: Page, stack: Stack
) -> None:
    put_job(stack, "acme", "edit-me", schedule={"every": 3600}, max_runs=100,
            target={"type": "http", "url": stack.receiver.url("/ok"), "secret": SECRET,
                    "headers": {"X-Team": "billing"}})  # fmt: skip
    sign_in(page, stack, stack.keys["acme"])
    open_job(page, stack, "acme", "edit-me")
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_role("heading", name="Edit edit-me")).to_be_visible()
    expect(page.get_by_label("Job id")).to_have_attribute("readonly", "")
    expect(page.get_by_label("Every", exact=True)).to_be_checked()
    expect(page.get_by_label("Period")).to_have_value("3600")
    hours = page.locator("#preview tbody tr")  # on the hour: k * 3600 s since the epoch
    expect(hours).to_have_count(5)
    expect(hours.first.locator("td[data-label='UTC']")).to_contain_text(":00:00 UTC")
    expect(page.get_by_label("Headers")).to_have_value("X-Team: billing")
    expect(page.get_by_label("Signing secret")).to_have_value("")
    expect(page.locator("#f-secret-help")).to_contain_text("enter it again")

    page.get_by_label("Cron", exact=True).check()  # keyboard-reachable radios
    page.get_by_label("Cron expressions").fill("0 9 * * 1-5\n0 12 * * 6")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    preview = page.locator("#preview")
    expect(preview.locator("thead")).to_contain_text("Expressions")
    # the next five instants name their expression; at least four are weekdays' (the
    # Saturday one is among them only from Monday 9:00 to Saturday noon)
    weekday = preview.locator("td[data-label='Expressions']", has_text="0 9 * * 1-5")
    expect(weekday.first).to_be_visible()
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#f-secret-error")).to_contain_text("enter it again")
    page.get_by_label("Signing secret").fill(SECRET)
    version = get_job(stack, "edit-me")["version"]
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="edit-me", exact=True)).to_be_visible()
    expect(page.locator("#definition")).to_contain_text('"0 12 * * 6"')
    job = get_job(stack, "edit-me")
    assert job["version"] > version
    assert job["definition"]["max_runs"] == 100  # not in the form, kept
    assert job["definition"]["target"]["secret"] == "redacted"  # still signed
    assert job["definition"]["schedule"]["cron"] == ["0 9 * * 1-5", "0 12 * * 6"]

    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_label("Cron expressions")).to_have_value("0 9 * * 1-5\n0 12 * * 6")
    put_job(stack, "acme", "edit-me", schedule={"cron": "0 7 * * *"})  # someone else, meanwhile
    page.get_by_label("Cron expressions").fill("0 8 * * *")
    page.get_by_label("Signing secret").fill(SECRET)
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#form-errors")).to_contain_text("the job changed meanwhile")
    assert get_job(stack, "edit-me")["definition"]["schedule"]["cron"] == "0 7 * * *"
    page.get_by_role("button", name="Reload the form").click()
    expect(page.get_by_label("Cron expressions")).to_have_value("0 7 * * *")
    expect(page.get_by_label("Signing secret")).to_have_value("")
    expect(page.locator("#f-secret-help")).not_to_contain_text("enter it again")


def test_the_json_tab_takes_a_whole_definition(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.keys["acme"])
    page.goto(f"{stack.url}/ui/new")
    form_tab = page.get_by_role("tab", name="Form")
    expect(form_tab).to_have_attribute("aria-selected", "true")
    form_tab.focus()
    form_tab.press("ArrowRight")
    expect(page.get_by_role("tab", name="JSON")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tab", name="JSON")).to_be_focused()
    text = page.get_by_label("The whole definition (JSON)")
    expect(text).to_have_value(re.compile(re.escape('"cron": "*/5 * * * *"')))  # the form's
    copied = json.dumps({"tenant": "acme", "job_id": "pasted", "version": 7,
                         "schedule": {"cron": "0 25 * * *"},
                         "target": {"type": "kafka", "topic": "pasted.out"}})  # fmt: skip
    text.fill(copied)
    page.get_by_role("button", name="Create job").click()
    error = page.locator("#f-json-error")
    expect(error).to_contain_text("schedule.cron: hour: '25' is out of range")
    expect(page.get_by_label("Job id")).to_have_value("pasted")
    text.fill(copied.replace("0 25", "0 23"))
    page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="pasted", exact=True)).to_be_visible()
    expect(page.locator("#definition")).to_contain_text('"topic": "pasted.out"')

    page.goto(f"{stack.url}/ui/new")
    page.get_by_label("Job id").fill("pasted")
    page.get_by_label("URL", exact=True).fill(stack.receiver.url("/ok"))
    page.get_by_role("button", name="Create job").click()  # never replaces a job by accident
    expect(page.locator("#f-job-id-error")).to_contain_text("a job with this id exists")
    assert get_job(stack, "pasted")["definition"]["target"]["type"] == "kafka"
    page.get_by_role("tab", name="JSON").click()
    expect(page.get_by_label("The whole definition (JSON)")).to_have_value(re.compile("/ok"))
    page.get_by_label("The whole definition (JSON)").fill("{not json")
    page.get_by_role("tab", name="Form").click()
    expect(page.locator("#f-json-error")).to_contain_text("not JSON")
    expect(page.get_by_role("tab", name="JSON")).to_have_attribute("aria-selected", "true")
    httpx.delete(f"{stack.url}/v1/jobs/pasted", headers=auth(stack.keys["acme"]))

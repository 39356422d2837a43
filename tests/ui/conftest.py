"""One real stack for the console tests (package scope: every module of tests/ui shares it, to
stay within minutes): scheduler, dispatcher, projector and ``schedulerstream api`` processes on
fresh topics, a webhook receiver, two tenants and an operator key, and Debian's headless
Chromium under Playwright."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from harness.procs import ProcessorProcess, ReceiverProcess
from schedulerstream.kafka import topics
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.api.helpers import ApiProcess
from tests.conftest import _delete_topics
from tests.projector.kafka_helpers import ProjectorProcess
from tests.ui.browser import FLAGS, ensure_chromium

OPERATOR_KEY = "op_" + uuid.uuid4().hex
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
WIDTHS = {"desktop": (1280, 860), "phone": (390, 844)}


@dataclass
class Stack:
    url: str
    keys: dict[str, str]
    receiver: ReceiverProcess
    settings: Settings


@pytest.fixture(scope="package")
def stack(broker_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("ui")
    prefix = f"u{uuid.uuid4().hex[:10]}."
    settings = broker_settings.model_copy(
        update={"topic_prefix": prefix, "partitions": 2, "data_dir": root / "state",
                "operator_key": OPERATOR_KEY}
    )  # fmt: skip
    topics.apply(settings)
    admin = TenantAdmin(settings)
    keys = {name: admin.create(name)[1] for name in ("acme", "globex")}
    receiver = ReceiverProcess().start()
    procs: list[ProcessorProcess] = [
        ProcessorProcess(settings, "scheduler", "s1", root, data_dir=root / "s1"),
        ProcessorProcess(
            settings, "dispatcher", "d1", root, data_dir=root / "d1", allow_private_targets=True
        ),
        ProjectorProcess(settings, "p1", root),
    ]
    api = ApiProcess(settings, root, data_dir=root / "p1")
    try:
        for proc in [*procs, api]:
            proc.start()
        api.wait_ready()
        yield Stack(api.url, keys, receiver, settings)
    finally:
        for proc in [api, *procs]:
            if proc.alive():
                assert proc.stop() == 0, proc.log()[-3000:]
        receiver.stop()
        _delete_topics(broker_settings, prefix)


@pytest.fixture(scope="package")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Headless Chromium with a fresh profile (``--user-data-dir``), at 1280 px."""
    executable = ensure_chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(executable),
            headless=True,
            args=FLAGS,
            viewport={"width": WIDTHS["desktop"][0], "height": WIDTHS["desktop"][1]},
            timezone_id="America/New_York",
            locale="en-US",
        )
        context.set_default_timeout(20_000)
        yield context
        context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    """A new tab (its own sessionStorage: signed out)."""
    tab = browser.new_page()
    yield tab
    tab.close()


def shoot(page: Page, name: str) -> None:
    """Screenshots of the page at 1280 px and at a phone's width (tests/ui/screenshots/)."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTHS["desktop"][0], "height": WIDTHS["desktop"][1]})

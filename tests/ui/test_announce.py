"""``schedulerstream dev`` says the console's URL once the API it runs answers /readyz."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from schedulerstream.api.ui.announce import API_READY, say_when_ready, with_console_url
from tests.targets.procs import free_port
from tests.ui.conftest import Stack

pytestmark = pytest.mark.kafka


def test_the_console_url_is_said_when_the_api_is_ready(stack: Stack) -> None:
    port = urlsplit(stack.url).port
    assert port is not None
    lines: list[str] = []
    assert say_when_ready(port, lines.append)
    assert lines == [
        f"console: http://127.0.0.1:{port}/ui "
        "(sign in with a key from `schedulerstream tenants create NAME`)"
    ]


def test_an_api_that_never_answers_is_said_so() -> None:
    lines: list[str] = []
    port = free_port()
    assert not say_when_ready(port, lines.append, wait_s=0.2)
    assert lines == [
        f"console: the API is not ready after 0.2 s; it will be at http://127.0.0.1:{port}/ui"
    ]


def test_only_the_apis_ready_line_starts_the_announcer() -> None:
    lines: list[str] = []
    relay = with_console_url(0, lines.append)  # port 0: a random port, no URL to say
    relay("scheduler: ready")
    relay(API_READY)
    assert lines == ["scheduler: ready", API_READY]

"""``is_http_url``'s fast path gives urlsplit's verdict (the one the model used before)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from schedulerstream.model import _PLAIN_HTTP_URL, is_http_url


def by_urlsplit(value: str) -> bool:
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


URLS = [
    "https://hooks.example.com/t/1",
    "http://127.0.0.1:8080/x?y=1#z",
    "http://host",
    "http://host:",
    "http://host:99999/",
    "http://host:123456/",
    "http://host:abc/",
    "http://user:pw@host/",
    "http://@/",
    "http:///path",
    "http://",
    "https://:80/",
    "HTTP://Host.Example/",
    "ftp://host/",
    "https//host/",
    " https://host/",
    "https://ho\tst/",
    "https://host/pa\nth",
    "https://[::1]:8080/",
    "https://[::1/",
    "https://hôst.example/",
    "https://host.example\\evil/",
    "https://host;x=1/",
    "https://%41/",
    "https://./",
    "https://host?q",
    "https://host#f",
    "javascript:alert(1)",
    "",
]


@pytest.mark.parametrize("url", URLS)
def test_the_same_verdict_as_urlsplit(url: str) -> None:
    try:
        expected = by_urlsplit(url)
    except ValueError:
        expected = False
    try:
        got = is_http_url(url)
    except ValueError:
        got = False
    assert got == expected, url


def test_the_fast_path_takes_the_usual_urls() -> None:
    fast = [u for u in URLS if _PLAIN_HTTP_URL.match(u)]
    assert "https://hooks.example.com/t/1" in fast
    assert "http://127.0.0.1:8080/x?y=1#z" in fast
    assert not any(u.startswith((" ", "HTTP")) or "[" in u or "@" in u for u in fast)

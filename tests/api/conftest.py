"""API fixtures: two tenants with keys, and the app in-process (TestClient) on a real broker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from schedulerstream.api import create_app
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin


@pytest.fixture
def keys(topo: Settings) -> dict[str, str]:
    """API keys of tenants ``acme`` and ``globex``."""
    admin = TenantAdmin(topo)
    return {name: admin.create(name)[1] for name in ("acme", "globex")}


@pytest.fixture
def client(topo: Settings, keys: dict[str, str]) -> Iterator[TestClient]:
    """The app in-process, ready (tenants loaded)."""
    with TestClient(create_app(topo), raise_server_exceptions=False) as test_client:
        deadline = time.monotonic() + 30
        while test_client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, test_client.get("/readyz").json()
            time.sleep(0.05)
        yield test_client

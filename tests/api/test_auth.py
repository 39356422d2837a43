"""Bearer API keys: 401 without or with a bad key; a revoked key stops working at once."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.api.helpers import auth

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic YWNtZTpwdw=="},
        {"Authorization": "Bearer nonsense"},
        auth("ss_acme_" + "0" * 64),
        auth("ss_nobody_" + "0" * 64),
    ],
)
def test_missing_or_bad_key_is_401(client: TestClient, headers: dict[str, str]) -> None:
    for path in ("/v1/jobs", "/v1/jobs/j1", "/v1/runs/acme%2Fj1%40x", "/v1/cron/next?expr=@daily"):
        response = client.get(path, headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"


def test_a_key_of_one_tenant_is_not_valid_for_another(
    client: TestClient, keys: dict[str, str]
) -> None:
    forged = keys["acme"].replace("ss_acme_", "ss_globex_")
    assert client.get("/v1/jobs", headers=auth(forged)).status_code == 401
    assert client.get("/v1/jobs", headers=auth(keys["acme"])).status_code == 200


def test_revoked_key_stops_working_and_the_new_one_works(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    _, new_key = TenantAdmin(topo).revoke_key("acme")
    assert new_key is not None
    deadline = time.monotonic() + 1.0
    while client.get("/v1/jobs", headers=auth(new_key)).status_code != 200:
        assert time.monotonic() < deadline, "the new key did not work within a second"
        time.sleep(0.02)
    assert client.get("/v1/jobs", headers=auth(keys["acme"])).status_code == 401
    TenantAdmin(topo).revoke_key("acme", issue_new=False)
    deadline = time.monotonic() + 1.0
    while client.get("/v1/jobs", headers=auth(new_key)).status_code != 401:
        assert time.monotonic() < deadline, "the key was still valid a second after revocation"
        time.sleep(0.02)


def test_health_and_metrics_need_no_key(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    client.get("/v1/jobs")
    text = client.get("/metrics").text
    assert 'schedulerstream_api_requests_total{method="GET",route="/v1/jobs",status="401"}' in text
    assert "schedulerstream_api_tenants 2.0" in text
    assert client.get("/openapi.json").json()["paths"]["/v1/jobs/{job_id}"]["put"]

"""A JSON body sent without ``Content-Type: application/json`` gets a 415 that says so (issue
#10: ``curl -d '{...}'`` sends a form type and used to get 422 "Input should be a valid
dictionary")."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from schedulerstream.api.content import is_json
from tests.api.helpers import auth, job_body

pytestmark = pytest.mark.kafka

FORM = "application/x-www-form-urlencoded"


def _put(client: TestClient, key: str, content_type: str | None, job: str = "ping") -> Response:
    headers = auth(key)
    if content_type is not None:
        headers["Content-Type"] = content_type
    return client.put(f"/v1/jobs/{job}", content=json.dumps(job_body()), headers=headers)


def test_curls_default_form_type_gets_a_415_naming_both_types(
    client: TestClient, keys: dict[str, str]
) -> None:
    response = _put(client, keys["acme"], FORM)
    assert response.status_code == 415, response.text
    detail = response.json()["detail"]
    assert detail == (
        "the request body must be JSON sent with 'Content-Type: application/json'; this "
        f"request has 'Content-Type: {FORM}' (curl -d sends form data unless given "
        "-H 'Content-Type: application/json')"
    )


def test_other_types_and_none_are_refused_by_name(client: TestClient, keys: dict[str, str]) -> None:
    for content_type, received in [
        (None, "no Content-Type"),
        ("text/plain", "'Content-Type: text/plain'"),
        ("text/json", "'Content-Type: text/json'"),
        ("multipart/form-data; boundary=x", "'Content-Type: multipart/form-data; boundary=x'"),
    ]:
        response = _put(client, keys["acme"], content_type)
        assert response.status_code == 415, response.text
        detail = response.json()["detail"]
        assert f"this request has {received}" in detail
        assert "'Content-Type: application/json'" in detail


def test_json_types_are_accepted(client: TestClient, keys: dict[str, str]) -> None:
    for content_type in ["application/json", "application/json; charset=utf-8",
                         "Application/JSON", "application/merge-patch+json"]:  # fmt: skip
        response = _put(client, keys["acme"], content_type)
        assert response.status_code == 200, (content_type, response.text)


def test_a_body_that_is_optional_may_be_left_out_without_a_type(
    client: TestClient, keys: dict[str, str]
) -> None:
    assert _put(client, keys["acme"], "application/json").status_code == 200
    trigger = client.post("/v1/jobs/ping/trigger", headers=auth(keys["acme"]))
    assert trigger.status_code == 202, trigger.text
    as_form = client.post(
        "/v1/jobs/ping/trigger",
        content=b'{"request_id": "r1"}',
        headers={**auth(keys["acme"]), "Content-Type": FORM},
    )
    assert as_form.status_code == 415, as_form.text


def test_the_415_comes_before_authentication_and_validation(client: TestClient) -> None:
    """The media type is the first thing wrong with such a request: say that first."""
    response = client.put("/v1/jobs/ping", content=b"not even json", headers={"Content-Type": FORM})
    assert response.status_code == 415, response.text


def test_every_operation_with_a_json_body_refuses_other_types(client: TestClient) -> None:
    """Present and future routes alike (the dependency is app-wide), each documented."""
    paths = client.get("/openapi.json").json()["paths"]
    operations = [
        (method, path, operation)
        for path, by_method in paths.items()
        for method, operation in by_method.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert {
        ("put", "/v1/jobs/{job_id}"),
        ("post", "/v1/jobs/{job_id}/trigger"),
        ("post", "/v1/jobs/{job_id}/backfill"),
    } <= {(method, path) for method, path, _ in operations}
    for method, path, operation in operations:
        assert "415" in operation["responses"], (method, path)
        url = re.sub(r"\{[^}]+\}", "x", path)
        response = client.request(method, url, content=b'{"a": 1}', headers={"Content-Type": FORM})
        assert response.status_code == 415, (method, path, response.text)


def test_routes_without_a_body_ignore_the_type(client: TestClient, keys: dict[str, str]) -> None:
    response = client.get("/v1/jobs", headers={**auth(keys["acme"]), "Content-Type": FORM})
    assert response.status_code == 200, response.text


def test_is_json() -> None:
    assert is_json("application/json") and is_json("application/cloudevents+json")
    assert is_json("application/json;charset=UTF-8")
    assert not is_json(None) and not is_json("") and not is_json("text/plain")
    assert not is_json(FORM) and not is_json("application/jsonx")

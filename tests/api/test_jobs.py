"""Jobs through the API in-process: writes produce events and answer with the version; reads
come from the read model (or, before it catches up, this instance's own write)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from schedulerstream.api import create_app
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.kafka.topics import ensure_work_topic
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.api.helpers import SECRET, auth, job_body, seed_job, seed_run
from tests.support.waits import wait_until

pytestmark = pytest.mark.kafka


def _events(settings: Settings, topic: str) -> list[tuple[str, dict[str, Any] | None]]:
    found: list[tuple[str, dict[str, Any] | None]] = []
    for message in read_topic(settings, settings.topic(topic), idle_timeout=1.0):
        value = message.value()
        record = None if value is None else default_codec().decode(value)[1]
        found.append((message.key().decode(), record))
    return found


def test_put_get_pending_then_projected(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    h = auth(keys["acme"])
    put = client.put("/v1/jobs/j1", json=job_body(), headers=h)
    assert put.status_code == 200, put.text
    version = put.json()["version"]
    assert put.headers["etag"] == f'"{version}"'
    got = client.get("/v1/jobs/j1", headers=h).json()
    assert (got["projection"], got["version"], got["paused"]) == ("pending", version, False)
    assert len(got["next_fire_at"]) == 3 and got["definition"]["payload"] == {"n": 1}
    [(key, record)] = _events(topo, "schedules")
    assert key == "acme/j1" and record is not None and record["version"] == version
    seed_job(topo, "acme", "j1", version)
    got = client.get("/v1/jobs/j1", headers=h).json()
    assert got["projection"] == "current" and got["created_at"] is not None
    listed = client.get("/v1/jobs", headers=h).json()
    assert [j["job_id"] for j in listed["items"]] == ["j1"]


def test_if_match(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    assert (
        client.put("/v1/jobs/j1", json=job_body(), headers={**h, "If-Match": "1"}).status_code
        == 409
    )
    version = client.put("/v1/jobs/j1", json=job_body(), headers=h).json()["version"]
    stale = client.put("/v1/jobs/j1", json=job_body(), headers={**h, "If-Match": str(version - 1)})
    assert stale.status_code == 409 and str(version) in stale.json()["detail"]
    fresh = client.put("/v1/jobs/j1", json=job_body(), headers={**h, "If-Match": f'"{version}"'})
    assert fresh.status_code == 200 and fresh.json()["version"] > version
    bad = client.put("/v1/jobs/j1", json=job_body(), headers={**h, "If-Match": "abc"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "If-Match"


def _fields(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {p["field"]: p["message"] for p in response.json()["detail"]}


def test_validation_errors_name_the_field(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    put = lambda body: client.put("/v1/jobs/j1", json=body, headers=h)  # noqa: E731
    assert "minute" in _fields(put(job_body(schedule={"cron": "61 * * * *"})))["schedule.cron"]
    zone = _fields(put(job_body(schedule={"cron": "* * * * *", "timezone": "Mars/Olympus"})))
    assert "Mars/Olympus" in zone["schedule.timezone"]
    assert "duration" in _fields(put(job_body(timeout="soon")))["timeout"]
    url = _fields(put(job_body(target={"type": "http", "url": "ftp://x"})))
    assert "http(s)" in url["target.http.url"]
    assert "must match" in _fields(put(job_body(tenant="globex")))["tenant"]
    assert "must match" in _fields(put(job_body(job_id="other")))["job_id"]
    assert "extra" in _fields(put(job_body(colour="red")))["colour"].lower()
    assert "schedule" in _fields(put({"target": job_body()["target"]}))
    ancient = {"at": "0001-01-01T00:00:00+05:00"}
    assert "1970" in _fields(put(job_body(schedule=ancient)))["schedule.at"]
    window = {"start": "0001-01-01T00:00:00+05:00", "end": "9999-12-31T23:00:00-05:00"}
    client.put("/v1/jobs/j1", json=job_body(), headers=h)
    assert set(_fields(client.post("/v1/jobs/j1/backfill", json=window, headers=h))) == {
        "start", "end",
    }  # fmt: skip
    after = "after=0001-01-01T00:00:00%2B05:00"
    assert "after" in _fields(client.get(f"/v1/cron/next?expr=@daily&{after}", headers=h))
    bad_json = client.put(
        "/v1/jobs/j1", content=b"{", headers={**h, "Content-Type": "application/json"}
    )
    assert bad_json.status_code == 422
    assert "job_id" in _fields(client.get("/v1/jobs/Bad%20Id", headers=h))
    assert "limit" in _fields(client.get("/v1/jobs?limit=0", headers=h))
    assert "cursor" in _fields(client.get("/v1/jobs?cursor=zz", headers=h))


def test_another_tenants_job_and_runs_are_404(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    client.put("/v1/jobs/j1", json=job_body(), headers=auth(keys["acme"]))
    seed_job(topo, "acme", "j2", 5)
    seed_run(topo, "acme", "j2", "acme/j2@20250101T000000Z", "pending")
    other = auth(keys["globex"])
    for job in ("j1", "j2", "nope"):
        assert client.get(f"/v1/jobs/{job}", headers=other).status_code == 404
        assert client.get(f"/v1/jobs/{job}/runs", headers=other).status_code == 404
        assert client.delete(f"/v1/jobs/{job}", headers=other).status_code == 404
        for action in ("pause", "resume", "trigger"):
            assert client.post(f"/v1/jobs/{job}/{action}", headers=other).status_code == 404
        window = {"start": "2025-01-01T00:00:00Z", "end": "2025-01-02T00:00:00Z"}
        backfill = client.post(f"/v1/jobs/{job}/backfill", json=window, headers=other)
        assert backfill.status_code == 404
        assert client.put(f"/v1/jobs/{job}", json=job_body(), headers=other).status_code == 200
    run = "/v1/runs/acme%2Fj2%4020250101T000000Z"
    assert client.get(run, headers=other).status_code == 404
    assert client.post(f"{run}/cancel", headers=other).status_code == 404
    assert client.get(run, headers=auth(keys["acme"])).status_code == 200
    assert [j["job_id"] for j in client.get("/v1/jobs", headers=other).json()["items"]] == []


def test_pause_and_resume_keep_the_secret(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    h = auth(keys["acme"])
    target = {"type": "http", "url": "https://example.com/h", "secret": SECRET}
    first = client.put("/v1/jobs/j1", json=job_body(target=target), headers=h).json()["version"]
    got = client.get("/v1/jobs/j1", headers=h).json()
    assert got["definition"]["target"]["secret"] == "redacted"
    paused = client.post("/v1/jobs/j1/pause", headers=h).json()
    assert paused["paused"] is True and paused["version"] > first
    assert client.post("/v1/jobs/j1/pause", headers=h).json()["version"] == paused["version"]
    resumed = client.post("/v1/jobs/j1/resume", headers=h).json()
    assert resumed["paused"] is False and resumed["version"] > paused["version"]
    written = [JobDefinition.from_avro(r) for _, r in _events(topo, "schedules") if r is not None]
    assert [(j.paused, j.target.secret) for j in written] == [  # type: ignore[union-attr]
        (False, SECRET), (True, SECRET), (False, SECRET),
    ]  # fmt: skip


def test_pause_from_the_read_model(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    h = auth(keys["acme"])
    seed_job(topo, "acme", "secret", 10)
    refused = client.post("/v1/jobs/secret/pause", headers=h)
    assert refused.status_code == 409 and "PUT the full definition" in refused.json()["detail"]
    client.put("/v1/jobs/plain", json=job_body(), headers=h)
    assert client.post("/v1/jobs/plain/pause", headers=h).json()["paused"] is True
    assert client.get("/v1/jobs/plain", headers=h).json()["next_fire_at"] == []


def test_trigger_and_backfill(client: TestClient, keys: dict[str, str], topo: Settings) -> None:
    h = auth(keys["acme"])
    client.put("/v1/jobs/j1", json=job_body(paused=True), headers=h)
    triggered = client.post("/v1/jobs/j1/trigger", json={"request_id": "r-1"}, headers=h)
    assert triggered.status_code == 202
    assert triggered.json()["run_id"] == "acme/j1@manual-r-1"
    assert "@manual-" in client.post("/v1/jobs/j1/trigger", headers=h).json()["run_id"]
    bad = client.post("/v1/jobs/j1/trigger", json={"request_id": "no spaces"}, headers=h)
    assert "request_id" in _fields(bad)
    hour = int(time.time()) // 3600 * 3600 - 3600
    window = {"start": _iso(hour), "end": _iso(hour + 600), "rerun": True}
    filled = client.post("/v1/jobs/j1/backfill", json=window, headers=h)
    assert filled.status_code == 202 and filled.json()["runs"] == 10
    future = {"start": _iso(hour), "end": _iso(hour + 10 * 86_400)}
    assert 0 < client.post("/v1/jobs/j1/backfill", json=future, headers=h).json()["runs"] <= 120
    backwards = {"start": _iso(hour), "end": _iso(hour - 60)}
    assert "end" in _fields(client.post("/v1/jobs/j1/backfill", json=backwards, headers=h))
    huge = {"start": "1971-01-01T00:00:00Z", "end": _iso(hour)}
    assert "end" in _fields(client.post("/v1/jobs/j1/backfill", json=huge, headers=h))
    commands = [r["command"] for _, r in _events(topo, "commands") if r is not None]
    kinds = [name.rsplit(".", 1)[-1] for name, _ in commands]
    assert kinds == ["TriggerNow", "TriggerNow", "Backfill", "Backfill"]


def _iso(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def test_runs_list_get_cancel(client: TestClient, keys: dict[str, str], topo: Settings) -> None:
    h = auth(keys["acme"])
    seed_job(topo, "acme", "j1", 5)
    seed_run(topo, "acme", "j1", "acme/j1@20250101T000000Z", "succeeded")
    seed_run(topo, "acme", "j1", "acme/j1@manual-x", "running")
    runs = client.get("/v1/jobs/j1/runs", headers=h).json()["items"]
    assert {(r["run_id"], r["status"]) for r in runs} == {
        ("acme/j1@20250101T000000Z", "succeeded"), ("acme/j1@manual-x", "running"),
    }  # fmt: skip
    only = client.get("/v1/jobs/j1/runs?status=running", headers=h).json()["items"]
    assert [r["run_id"] for r in only] == ["acme/j1@manual-x"]
    detail = client.get("/v1/runs/acme%2Fj1%40manual-x", headers=h).json()
    assert detail["attempts"] == [] and detail["status"] == "running"
    assert client.post("/v1/runs/acme%2Fj1%40manual-x/cancel", headers=h).status_code == 202
    done = client.post("/v1/runs/acme%2Fj1%4020250101T000000Z/cancel", headers=h)
    assert done.status_code == 409
    assert client.get("/v1/runs/acme%2Fj1%40manual-nope", headers=h).status_code == 404
    assert client.get("/v1/runs/garbage", headers=h).status_code == 404
    cancels = [r["command"][1] for _, r in _events(topo, "commands") if r is not None]
    assert cancels == [{"run_id": "acme/j1@manual-x", "reason": "cancelled by request"}]


def test_delete_hides_the_job_at_once(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    client.put("/v1/jobs/j1", json=job_body(), headers=h)
    assert client.delete("/v1/jobs/j1", headers=h).json() == {"job_id": "j1", "deleted": True}
    assert client.get("/v1/jobs/j1", headers=h).status_code == 404
    assert client.delete("/v1/jobs/j1", headers=h).status_code == 404


def test_cron_next_with_dst_notes(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    query = "expr=30 2 * * *&tz=Europe/Berlin&count=2&after=2025-03-29T12:00:00Z&dst_gap=skip"
    body = client.get(f"/v1/cron/next?{query}", headers=h).json()
    assert body["instants"][0]["utc"] == "2025-03-31T00:30:00Z"
    assert "DST gap" in body["instants"][0]["note"]
    bad_field = _fields(client.get("/v1/cron/next?expr=61 * * * *", headers=h))
    assert bad_field == {"expr": "minute: '61' is out of range 0-59"}
    bad_zone = _fields(client.get("/v1/cron/next?expr=@daily&tz=No/Where", headers=h))
    assert bad_zone == {"tz": "unknown IANA time zone 'No/Where'"}
    assert "count" in _fields(client.get("/v1/cron/next?expr=@daily&count=0", headers=h))


def test_an_sqs_region_botocore_does_not_know_is_refused_at_once(
    client: TestClient, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch, real_aws: Any
) -> None:
    h = auth(keys["acme"])
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/q"
    typo = {"type": "sqs", "queue_url": queue, "region": "eu-west1"}
    refused = _fields(client.put("/v1/jobs/j1", json=job_body(target=typo), headers=h))
    assert refused["target"].startswith("'eu-west1' is not an SQS region this botocore knows")
    notify = {"on": ["paused"], "target": typo}
    assert "eu-west1" in _fields(client.put("/v1/jobs/j1", json=job_body(notify=notify),
                                            headers=h))["notify.target"]  # fmt: skip
    ok = client.put("/v1/jobs/j1", json=job_body(target={**typo, "region": "eu-west-1"}), headers=h)
    assert ok.status_code in (200, 201), ok.text
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324")  # an emulator: any name
    local = client.put("/v1/jobs/j2", json=job_body(target={**typo, "region": "elasticmq"}),
                       headers=h)  # fmt: skip
    assert local.status_code in (200, 201), local.text


def test_a_pool_or_topic_not_granted_to_the_tenant_is_refused_at_once(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    TenantAdmin(topo).update("acme", pools=["reports"], topics=["acme.*"])
    view = client.app.state.api.tenants  # type: ignore[attr-defined]
    wait_until(lambda: view.grants("acme") is not None, 30, "the grants in the API's view")
    h = auth(keys["acme"])
    put = lambda body: client.put("/v1/jobs/j1", json=body, headers=h)  # noqa: E731
    pool = _fields(put(job_body(target={"type": "worker", "pool": "billing"})))
    assert "worker pool 'billing' is not granted to tenant acme" in pool["target"]
    topic = _fields(put(job_body(target={"type": "kafka", "topic": "globex.out"})))
    assert "Kafka topic 'globex.out' is not granted" in topic["target"]
    notify = {"on": ["paused"], "target": {"type": "worker", "pool": "billing"}}
    assert "billing" in _fields(put(job_body(notify=notify)))["notify.target"]
    ok = put(job_body(target={"type": "kafka", "topic": "acme.out"}))
    assert ok.status_code in (200, 201), ok.text
    TenantAdmin(topo).update("acme", topics=["acme.reports.*"])  # narrowed: acme.out left out
    wait_until(lambda: "acme.reports." in view.grants("acme").prefixes, 30, "the narrowing")
    paused = client.post("/v1/jobs/j1/pause", headers=h)  # its runs are refused: it may stop
    assert paused.status_code == 200 and paused.json()["paused"], paused.text
    other = client.put("/v1/jobs/j1", json=job_body(target={"type": "worker", "pool": "billing"}),
                       headers=auth(keys["globex"]))  # fmt: skip
    assert other.status_code in (200, 201), other.text  # globex has no grants: any pool


def test_a_new_worker_pool_past_the_cap_is_refused_at_once_naming_the_field(
    keys: dict[str, str], topo: Settings
) -> None:
    settings = topo.model_copy(update={"max_work_pools": 1})
    ensure_work_topic(settings, "etl")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        wait_until(lambda: client.get("/readyz").status_code == 200, 30, "the API")
        h = auth(keys["acme"])
        put = lambda body: client.put("/v1/jobs/j1", json=body, headers=h)  # noqa: E731
        ok = put(job_body(target={"type": "worker", "pool": "etl"}))
        assert ok.status_code in (200, 201), ok.text
        refused = _fields(put(job_body(target={"type": "worker", "pool": "new"})))
        assert refused["target.pool"] == (
            "worker pool 'new' has no work topic and none is made: the cluster holds 1 work "
            "topics and SCHEDULERSTREAM_MAX_WORK_POOLS=1 (an operator may raise the cap, or "
            "delete the topic of a pool no job uses)"
        )


def test_a_target_on_a_reserved_topic_is_refused_at_once_naming_the_field(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    h = auth(keys["acme"])
    put = lambda body: client.put("/v1/jobs/j1", json=body, headers=h)  # noqa: E731
    own = topo.topics.dispatcher_state
    evil = {"type": "kafka", "topic": own, "key": "run/x"}
    refused = _fields(put(job_body(target=evil)))
    assert refused["target.topic"] == (
        f"topic {own!r} is reserved: it is one of this deployment's topics"
    )
    notify = {"on": ["paused"], "target": {"type": "kafka", "topic": "__consumer_offsets"}}
    assert "Kafka's own" in _fields(put(job_body(notify=notify)))["notify.target.topic"]
    ok = put(job_body(target={"type": "kafka", "topic": f"orders.{own}"}))
    assert ok.status_code in (200, 201), ok.text

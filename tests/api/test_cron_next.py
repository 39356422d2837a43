"""``GET /v1/cron/next`` with several expressions (``or``) and excluded dates (``exclude``)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.api.helpers import auth

BASE = "/v1/cron/next?tz=America/New_York&after=2026-03-05T12:00:00Z"


def _fields(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {p["field"]: p["message"] for p in response.json()["detail"]}


def test_union_minus_excluded_dates_with_dst_notes(
    client: TestClient, keys: dict[str, str]
) -> None:
    query = (
        "&expr=0 9 * * MON-FRI&or=0 12 * * SAT&or=30 2 * * SUN%232"
        "&exclude=2026-03-09&exclude=2026-03-11..2026-03-12&count=6"
    )
    response = client.get(BASE + query, headers=auth(keys["acme"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["expr"] == "0 9 * * MON-FRI"
    assert body["or"] == ["0 12 * * SAT", "30 2 * * SUN#2"]
    assert body["exclude"] == ["2026-03-09", "2026-03-11..2026-03-12"]
    assert [(i["local"], i["expressions"]) for i in body["instants"]] == [
        ("2026-03-05T09:00:00-05:00", ["0 9 * * MON-FRI"]),
        ("2026-03-06T09:00:00-05:00", ["0 9 * * MON-FRI"]),
        ("2026-03-07T12:00:00-05:00", ["0 12 * * SAT"]),
        ("2026-03-08T03:00:00-04:00", ["30 2 * * SUN#2"]),
        ("2026-03-10T09:00:00-04:00", ["0 9 * * MON-FRI"]),
        ("2026-03-13T09:00:00-04:00", ["0 9 * * MON-FRI"]),
    ]
    assert body["instants"][3]["note"] == "02:30 does not exist (DST gap); fired at 03:00"


def test_errors_name_the_parameter(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    bad_or = _fields(client.get(BASE + "&expr=@daily&or=@hourly&or=0 9 * * MON%236", headers=h))
    assert bad_or == {
        "or.1": "day_of_week: 'MON#6': the occurrence after '#' must be 1-5 "
        "(a month has at most five of a weekday)"
    }
    bad_date = _fields(client.get(BASE + "&expr=@daily&exclude=2026-01-01&exclude=soon", headers=h))
    assert bad_date == {
        "exclude.1": "'soon' is not a date (YYYY-MM-DD) or a range (YYYY-MM-DD..YYYY-MM-DD)"
    }
    backwards = _fields(client.get(BASE + "&expr=@daily&exclude=2026-02-02..2026-02-01", headers=h))
    assert backwards == {"exclude.0": "range '2026-02-02..2026-02-01' ends before it starts"}

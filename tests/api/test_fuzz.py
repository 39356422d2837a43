"""Schemathesis fuzzes every operation of /openapi.json against a running ``schedulerstream
api`` process (with a valid key, so requests get past auth): no request yields a 5xx."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from schedulerstream.kafka import topics
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.api.helpers import ApiProcess, auth, job_body

pytestmark = pytest.mark.kafka
EXAMPLES = 25


@pytest.fixture(scope="module")
def fuzzed_api(
    broker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ApiProcess, str]]:
    """An API process on fresh topics, a tenant key, and one job to find."""
    root = tmp_path_factory.mktemp("fuzz")
    config = broker_settings.model_copy(
        update={"topic_prefix": f"f{uuid.uuid4().hex[:10]}.", "partitions": 2,
                "data_dir": root / "state"}
    )  # fmt: skip
    topics.apply(config)
    _, key = TenantAdmin(config).create("acme")
    proc = ApiProcess(config, root, data_dir=root / "state").start()
    try:
        proc.wait_ready()
        httpx.put(f"{proc.url}/v1/jobs/j1", json=job_body(), headers=auth(key), timeout=10)
        yield proc, key
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def test_no_request_yields_a_server_error(fuzzed_api: tuple[ApiProcess, str]) -> None:
    proc, key = fuzzed_api
    schema = schemathesis.openapi.from_url(f"{proc.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    statuses: Counter[int] = Counter()
    known = {"job_id": "j1"}  # also aim at the job that exists, to reach past the 404s
    for operation, mode, aim in itertools.product(operations, GenerationMode, (False, True)):
        if aim and (mode is GenerationMode.NEGATIVE or "job_id" not in operation.path):
            continue
        strategy = operation.as_strategy(mode, path_parameters=known if aim else None)

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(base_url=proc.url, headers=auth(key), timeout=30)
            statuses[response.status_code] += 1
            assert response.status_code < 500, (case.method, case.path, response.text)

        if aim:
            put = httpx.put(f"{proc.url}/v1/jobs/j1", json=job_body(), headers=auth(key))
            assert put.status_code == 200, put.text
        try:
            fuzz()
        except Unsatisfiable:
            # nothing can violate the schema of an operation without parameters (/healthz)
            assert mode is GenerationMode.NEGATIVE and not operation.path_parameters
    assert statuses[200] and statuses[202] and statuses[404] and statuses[422], statuses

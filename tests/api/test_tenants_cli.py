"""``schedulerstream tenants …``: the key is printed once and stored only as a hash."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.procs import settings_env
from schedulerstream.cli.tenants_cmd import tenants
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin, parse_key, secret_hash

pytestmark = pytest.mark.kafka


def _run(settings: Settings, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(tenants, list(args), env=settings_env(settings))
    return result.exit_code, result.output


def test_create_update_revoke_list(topo: Settings) -> None:
    code, out = _run(topo, "create", "acme", "--json")
    assert code == 0, out
    created = json.loads(out)
    assert created["tenant"] == "acme"
    tenant, secret = parse_key(created["api_key"]) or ("", "")
    assert tenant == "acme"
    record = TenantAdmin(topo).get("acme")
    assert record.key_hash == secret_hash(secret)
    assert secret not in record.encode().decode()

    code, out = _run(topo, "create", "acme")
    assert code != 0 and "already exists" in out

    code, out = _run(topo, "update", "acme", "--weight", "3", "--concurrency", "7", "--rate", "2.5")
    assert code == 0, out
    record = TenantAdmin(topo).get("acme")
    assert (record.weight, record.concurrency, record.rate_per_s) == (3.0, 7, 2.5)
    assert record.key_hash == secret_hash(secret)

    code, out = _run(topo, "revoke-key", "acme", "--json")
    assert code == 0, out
    new_key = json.loads(out)["api_key"]
    assert new_key != created["api_key"]
    assert TenantAdmin(topo).get("acme").key_hash != secret_hash(secret)

    code, out = _run(topo, "list", "--json")
    assert code == 0, out
    listed = [json.loads(line) for line in out.splitlines()]
    assert [(t["tenant"], t["has_key"], t["weight"]) for t in listed] == [("acme", True, 3.0)]
    assert "key_hash" not in out


def test_update_of_unknown_tenant_fails(topo: Settings) -> None:
    code, out = _run(topo, "update", "ghost", "--weight", "2")
    assert code != 0 and "no tenant 'ghost'" in out


def test_update_grants_pools_and_topics(topo: Settings) -> None:
    assert _run(topo, "create", "acme")[0] == 0
    code, out = _run(topo, "update", "acme", "--pool", "reports", "--pool", "mail",
                     "--topic", "acme.*")  # fmt: skip
    assert code == 0, out
    assert "pools=reports,mail topics=acme.*" in out
    record = TenantAdmin(topo).get("acme")
    assert (record.pools, record.topics) == (["reports", "mail"], ["acme.*"])
    code, out = _run(topo, "update", "acme", "--weight", "2")  # the grants stay
    assert code == 0 and TenantAdmin(topo).get("acme").pools == ["reports", "mail"], out
    code, out = _run(topo, "update", "acme", "--any-pool", "--no-topic")
    assert code == 0, out
    record = TenantAdmin(topo).get("acme")
    assert (record.pools, record.topics, record.weight) == (None, [], 2.0)
    code, out = _run(topo, "update", "acme", "--pool", "x", "--any-pool")
    assert code == 2 and "not more" in out
    code, out = _run(topo, "update", "acme", "--topic", "no spaces")
    assert code == 2 and "topics" in out
    assert TenantAdmin(topo).get("acme").topics == []  # nothing written

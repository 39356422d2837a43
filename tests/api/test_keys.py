"""API key format: the tenant is readable from the key; only the secret's hash is stored."""

from __future__ import annotations

import pytest

from schedulerstream.tenants import TenantRecord, new_key, parse_key, secret_hash


@pytest.mark.parametrize("tenant", ["acme", "a_b", "x.y-z_", "0"])
def test_round_trip(tenant: str) -> None:
    key, key_hash = new_key(tenant)
    parsed = parse_key(key)
    assert parsed is not None and parsed[0] == tenant
    assert secret_hash(parsed[1]) == key_hash and parsed[1] not in key_hash


@pytest.mark.parametrize(
    "key",
    ["", "ss_acme", "ss_acme_" + "0" * 63, "ss_acme_" + "G" * 64, "xx_acme_" + "0" * 64,
     "ss_Acme_" + "0" * 64, "ss__" + "0" * 64],
)  # fmt: skip
def test_malformed_keys_do_not_parse(key: str) -> None:
    assert parse_key(key) is None


def test_records_ignore_unknown_fields() -> None:
    data = b'{"tenant": "acme", "key_hash": null, "created_at_us": 1, "updated_at_us": 2, "x": 1}'
    record = TenantRecord.decode(data)
    assert (record.tenant, record.weight, record.concurrency) == ("acme", 1.0, None)
    assert TenantRecord.decode(record.encode()) == record

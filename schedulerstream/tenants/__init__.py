"""Tenants: API keys (stored hashed) and fair-share limits, as JSON records on the compacted
``cron.tenants`` topic (key = tenant id). The CLI writes them; API instances materialize them."""

from schedulerstream.tenants.admin import TenantAdmin, TenantExists, UnknownTenant
from schedulerstream.tenants.keys import new_key, parse_key, secret_hash
from schedulerstream.tenants.record import TenantRecord
from schedulerstream.tenants.view import TenantView

__all__ = [
    "TenantAdmin",
    "TenantExists",
    "TenantRecord",
    "TenantView",
    "UnknownTenant",
    "new_key",
    "parse_key",
    "secret_hash",
]

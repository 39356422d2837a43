"""Tenants: API keys (stored hashed) and fair-share limits, as JSON records on the compacted
``cron.tenants`` topic (key = tenant id). The CLI writes them; API instances and dispatchers
follow the topic (``TenantFollower``): the API for keys (``TenantView``), dispatchers for
weights and limits (``TenantPolicy``)."""

from schedulerstream.tenants.admin import TenantAdmin, TenantExists, UnknownTenant
from schedulerstream.tenants.follower import TenantFollower
from schedulerstream.tenants.keys import new_key, parse_key, secret_hash
from schedulerstream.tenants.policy import LiveMapping, TenantPolicy
from schedulerstream.tenants.record import TenantRecord
from schedulerstream.tenants.view import TenantView

__all__ = [
    "LiveMapping",
    "TenantAdmin",
    "TenantExists",
    "TenantFollower",
    "TenantPolicy",
    "TenantRecord",
    "TenantView",
    "UnknownTenant",
    "new_key",
    "parse_key",
    "secret_hash",
]

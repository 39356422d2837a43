"""Who is looking: a tenant (its API key) or the operator (``SCHEDULERSTREAM_OPERATOR_KEY``,
every tenant, read-only). Another tenant's job answers 404, as if it did not exist."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from schedulerstream.api.auth import api_state
from schedulerstream.api.errors import ApiError, not_found

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ConsoleKey",
    description="A tenant's API key, or the operator key (SCHEDULERSTREAM_OPERATOR_KEY).",
)
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True, slots=True)
class Viewer:
    """A signed-in console user: ``tenant`` is None for the operator."""

    tenant: str | None

    @property
    def operator(self) -> bool:
        return self.tenant is None

    def scope(self, tenant: str | None) -> str | None:
        """The tenant a query covers (None: every tenant, operator only); 404 for a tenant
        key naming another tenant."""
        if self.tenant is None:
            return tenant
        if tenant is not None and tenant != self.tenant:
            raise not_found("tenant")
        return self.tenant

    def one(self, tenant: str | None) -> str:
        """The single tenant a per-job query is about (the operator must name it)."""
        scoped = self.scope(tenant)
        if scoped is None:
            raise ApiError(404, "job not found (the operator key names the tenant)")
        return scoped


def viewer_of(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Viewer:
    """The viewer of a request's bearer key, or 401."""
    if credentials is None:
        raise ApiError(401, "missing bearer API key", _CHALLENGE)
    state = api_state(request)
    key = credentials.credentials
    operator = state.settings.operator_key
    if operator and hmac.compare_digest(key.encode(), operator.encode()):
        return Viewer(None)
    tenant = state.tenants.authenticate(key)
    if tenant is None:
        raise ApiError(401, "invalid API key", _CHALLENGE)
    return Viewer(tenant)


ViewerDep = Annotated[Viewer, Depends(viewer_of)]

"""Bearer API keys: the tenant comes from the key, never from the body or the path."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from schedulerstream.api.errors import ApiError
from schedulerstream.api.state import ApiState

_bearer = HTTPBearer(auto_error=False, description="An API key from `schedulerstream tenants`.")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def tenant_of(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The authenticated tenant, or 401."""
    if credentials is None:
        raise ApiError(401, "missing bearer API key", _CHALLENGE)
    tenant = api_state(request).tenants.authenticate(credentials.credentials)
    if tenant is None:
        raise ApiError(401, "invalid API key", _CHALLENGE)
    return tenant


Tenant = Annotated[str, Depends(tenant_of)]
State = Annotated[ApiState, Depends(api_state)]

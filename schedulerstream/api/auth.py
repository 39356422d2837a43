"""Bearer API keys: the tenant comes from the key, never from the body or the path."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from schedulerstream.api.errors import ApiError
from schedulerstream.api.state import ApiState
from schedulerstream.tenants.keys import parse_key

_bearer = HTTPBearer(auto_error=False, description="An API key from `schedulerstream tenants`.")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
CATCH_UP_S = 1.0  # how long a well-formed key that does not match is tried again
CATCH_UP_POLL_S = 0.02


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


async def tenant_of(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The authenticated tenant, or 401.

    A well-formed key that does not match yet is tried again for up to ``CATCH_UP_S``: the
    view follows cron.tenants a moment behind, and a key from ``tenants create`` is used at
    once by a script (README's quick start: ``KEY=$(...)`` then ``curl``). The wait holds no
    thread, and a wrong key is answered 401 once it is over."""
    if credentials is None:
        raise ApiError(401, "missing bearer API key", _CHALLENGE)
    tenants = api_state(request).tenants
    key = credentials.credentials
    tenant = tenants.authenticate(key)
    if tenant is None and parse_key(key) is not None:
        deadline = time.monotonic() + CATCH_UP_S
        while tenant is None and time.monotonic() < deadline:
            await asyncio.sleep(CATCH_UP_POLL_S)
            tenant = tenants.authenticate(key)
    if tenant is None:
        raise ApiError(401, "invalid API key", _CHALLENGE)
    return tenant


Tenant = Annotated[str, Depends(tenant_of)]
State = Annotated[ApiState, Depends(api_state)]

"""JSON bodies must say so: a body sent without ``Content-Type: application/json`` gets a 415
that names the type received and the one expected.

Without this, FastAPI hands such a body to validation as raw bytes and answers 422 "Input
should be a valid dictionary", which is what ``curl -d '{...}'`` (form-encoded by default) got.
Installed once for the whole app (``FastAPI(dependencies=...)``), so every route with a JSON
body, present or future, is covered; routes without a body, with no body sent, or taking form
data are left alone.
"""

from __future__ import annotations

import email.message
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi import params as fastapi_params
from fastapi.routing import APIRoute

from schedulerstream.api.errors import ApiError

EXPECTED = "application/json"
UNSUPPORTED = {
    "description": f"The body was not sent with `Content-Type: {EXPECTED}`.",
    "content": {
        EXPECTED: {
            "schema": {
                "type": "object",
                "properties": {"detail": {"type": "string"}},
                "required": ["detail"],
            }
        }
    },
}


def is_json(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (parameters allowed): exactly
    what FastAPI parses as JSON, so nothing it would accept is refused here."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def takes_json_body(route: object) -> bool:
    """Whether ``route`` parses its request body as JSON (a body parameter, not form data)."""
    if not isinstance(route, APIRoute) or route.body_field is None:
        return False
    return not isinstance(route.body_field.field_info, fastapi_params.Form)


def unsupported_media_type(content_type: str | None) -> ApiError:
    received = f"'Content-Type: {content_type}'" if content_type else "no Content-Type"
    hint = (
        " (curl -d sends form data unless given -H 'Content-Type: application/json')"
        if content_type and content_type.startswith("application/x-www-form-urlencoded")
        else ""
    )
    return ApiError(
        415,
        f"the request body must be JSON sent with 'Content-Type: {EXPECTED}'; "
        f"this request has {received}{hint}",
    )


async def _require_json_body(request: Request) -> None:
    if not takes_json_body(request.scope.get("route")):
        return
    if not await request.body():  # cached: FastAPI has already read it
        return  # no body: an optional body stays optional, a required one gets its 422
    content_type = request.headers.get("content-type")
    if not is_json(content_type):
        raise unsupported_media_type(content_type)


require_json_body = Depends(_require_json_body)


def document(app: FastAPI) -> None:
    """Describe the 415 in OpenAPI on every operation whose request body is JSON (done on the
    generated document: it sees every route, however routers were included)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                body = operation.get("requestBody") if isinstance(operation, dict) else None
                if body is not None and EXPECTED in body.get("content", {}):
                    operation.setdefault("responses", {}).setdefault("415", UNSUPPORTED)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

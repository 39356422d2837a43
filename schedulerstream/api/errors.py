"""Error bodies: 422 names each field and its problem, other errors carry one ``detail`` line."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from schedulerstream.errors import CodecError, SchedulerStreamError
from schedulerstream.errors import ValidationError as SchedulerValidationError
from schedulerstream.publish import PublishError
from schedulerstream.readmodel import ReadModelDataError, ReadModelUnavailable


class ApiError(SchedulerStreamError):
    """An HTTP error with a one-line explanation."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} not found")


def field_problem(field: str, message: str) -> JSONResponse:
    return JSONResponse({"detail": [{"field": field, "message": message}]}, status_code=422)


def _location(loc: tuple[object, ...] | list[object]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _request_invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": _location(e["loc"]), "message": str(e["msg"]).removeprefix("Value error, ")}
        for e in exc.errors()
    ]
    return JSONResponse({"detail": problems}, status_code=422)


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SchedulerValidationError)
    return field_problem(exc.field, exc.message)


async def _codec(_: Request, exc: Exception) -> JSONResponse:
    return field_problem("body", f"cannot be encoded: {exc}")


async def _refused(_: Request, exc: Exception) -> JSONResponse:
    return field_problem("request", f"a value was refused by the read model: {exc}")


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)


async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(SchedulerValidationError, _invalid)
    app.add_exception_handler(CodecError, _codec)
    app.add_exception_handler(ReadModelDataError, _refused)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ReadModelUnavailable, _unavailable)
    app.add_exception_handler(PublishError, _unavailable)

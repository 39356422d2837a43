"""The console's pages: one HTML shell for every /ui path (the script routes on the path) and
its static files, under a Content-Security-Policy that allows only this origin's own files."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent / "static"
ASSETS = ("console.js", "editor.js", "console.css")
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def shell() -> str:
    """index.html with each asset's URL carrying a hash of the assets (a new release is
    never served from a stale cache)."""
    digest = hashlib.sha256()
    for name in ASSETS:
        digest.update((STATIC / name).read_bytes())
    return (STATIC / "index.html").read_text().replace("{{v}}", digest.hexdigest()[:12])


@router.get("/ui", response_class=HTMLResponse)
@router.get("/ui/{_path:path}", response_class=HTMLResponse)
def page(_path: str = "") -> HTMLResponse:
    """The console (sign in, jobs, a job, a run, the overview)."""
    return HTMLResponse(shell(), headers=HEADERS)


def install(app: FastAPI) -> None:
    """Serve the console at /ui and its files at /ui/static (the routes of /v1/console are
    added with the API's routers)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    app.include_router(router)

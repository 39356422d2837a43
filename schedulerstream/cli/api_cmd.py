"""``schedulerstream api``: serve the REST API with uvicorn."""

from __future__ import annotations

import signal
from types import FrameType

import click

from schedulerstream.logs import configure_logging
from schedulerstream.settings import load_settings


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
def api(host: str, port: int) -> None:
    """Serve the REST API (OpenAPI at /openapi.json) against the read model and the broker."""
    import uvicorn

    from schedulerstream.api import create_app
    from schedulerstream.errors import SchedulerStreamError
    from schedulerstream.kafka.access import check_access

    configure_logging("api")
    settings = load_settings()
    try:  # its principal may authenticate and has its ACLs
        check_access(settings, "api")
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    app = create_app(settings)
    click.echo(f"api ready: http://{host}:{port} (OpenAPI at /openapi.json)", err=True)
    # uvicorn shuts down gracefully, then re-raises the signal to the handler it found: exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def _exit_cleanly(_sig: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)

"""The HTTP endpoint of a processor's metrics (``/metrics``, Prometheus text), on
``SCHEDULERSTREAM_METRICS_PORT`` (0: none) and ``SCHEDULERSTREAM_METRICS_HOST``."""

from __future__ import annotations

import logging
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from schedulerstream.errors import ConfigError
from schedulerstream.observability.collectors import registry_for
from schedulerstream.runtime import Processor
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)


class Exporter:
    """A started endpoint (a daemon thread); ``close()`` stops it."""

    def __init__(self, server: WSGIServer) -> None:
        self.server = server

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(settings: Settings, processor: Processor) -> Exporter | None:
    """Start serving ``processor``'s metrics; None when the port setting is 0."""
    if not settings.metrics_port:
        return None
    registry = registry_for(processor)
    try:
        server, _ = start_http_server(settings.metrics_port, settings.metrics_host, registry)
    except OSError as exc:
        raise ConfigError(
            f"invalid SCHEDULERSTREAM_METRICS_PORT: cannot listen on "
            f"{settings.metrics_host}:{settings.metrics_port}: {exc}"
        ) from exc
    exporter = Exporter(server)
    log.info("metrics on http://%s:%d/metrics", settings.metrics_host, exporter.port)
    return exporter

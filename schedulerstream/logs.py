"""Structured logs: one line per event, ``key=value`` pairs after a fixed prefix."""

from __future__ import annotations

import logging
import os
import sys


def configure_logging(component: str, level: str | None = None) -> None:
    """Log to stderr as ``time level component logger: message``."""
    chosen = (level or os.environ.get("LOG_LEVEL", "INFO")).upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s %(levelname)s component={component} logger=%(name)s %(message)s"
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(chosen)

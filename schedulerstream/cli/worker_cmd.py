"""``schedulerstream worker --pool P --app module:attr``: run one worker of a pool."""

from __future__ import annotations

import importlib
import sys

import click

from schedulerstream.errors import ConfigError, SchedulerStreamError
from schedulerstream.kafka.access import check_access
from schedulerstream.logs import configure_logging
from schedulerstream.runtime import install_signal_handlers
from schedulerstream.runtime.shutdown import STOP_DEADLINE_S
from schedulerstream.settings import load_settings
from schedulerstream.worker.app import WorkerApp
from schedulerstream.worker.runner import WorkerRunner


def load_app(spec: str) -> WorkerApp:
    """The WorkerApp named ``module:attr`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--app {spec!r}: expected module:attribute (e.g. myjobs:app)")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--app {spec!r}: cannot import {module_name}: {exc}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, WorkerApp):
        raise ConfigError(f"--app {spec!r}: {attr} is not a WorkerApp (got {type(app).__name__})")
    if not len(app):
        raise ConfigError(f"--app {spec!r}: the app has no handlers")
    return app


@click.command()
@click.option("--pool", required=True, help="The worker pool (the job target's pool).")
@click.option("--app", "app_spec", required=True, help="module:attribute of a WorkerApp.")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(1, 1000),
              help="Handlers running at once.")  # fmt: skip
@click.option("--drain", default=30.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to let running handlers finish on SIGTERM.")  # fmt: skip
@click.option("--tenant", "tenants", multiple=True, help="Take only this tenant's work "
              "(repeatable; default: every tenant's). Others' offers fail, unrun.")  # fmt: skip
def worker(pool: str, app_spec: str, concurrency: int, drain: float,
           tenants: tuple[str, ...]) -> None:  # fmt: skip
    """Run one worker of POOL (identity from SCHEDULERSTREAM_INSTANCE_ID)."""
    configure_logging("worker")
    settings = load_settings()
    app = load_app(app_spec)  # a bad --app is said first, with or without a broker
    try:  # its principal may authenticate and has its ACLs
        check_access(settings, "worker", pools=[pool])
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    runner = WorkerRunner(settings, app, pool, concurrency=concurrency, drain_s=drain,
                          tenants=frozenset(tenants) or None)  # fmt: skip
    install_signal_handlers(runner, deadline_s=drain + STOP_DEADLINE_S)  # drain, then stop
    runner.run()

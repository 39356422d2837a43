"""The ``schedulerstream`` command line: one click group, one module per command family.

Commands load lazily: a command's module (and what it imports: the runtime, FastAPI, aiohttp,
confluent_kafka) is imported only when that command runs, so ``--help`` and ``cron next`` start
fast. ``COMMANDS`` keeps each command's one-line help for the top-level ``--help`` listing
(tests/packaging/test_cli_start.py checks it matches the command's docstring).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from schedulerstream.errors import SchedulerStreamError

# name -> (module under schedulerstream.cli, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "acls": (
        "acls_cmd",
        "acls_group",
        "The minimal Kafka ACLs of each component: plan prints them, apply creates them.",
    ),
    "api": (
        "api_cmd",
        "api",
        "Serve the REST API (OpenAPI at /openapi.json) against the read model and the broker.",
    ),
    "backfill": (
        "jobs_cmd",
        "backfill",
        "Create the runs of a job's schedule in [--start, --end), showing progress.",
    ),
    "connect": (
        "connect_cmd",
        "connect",
        "A Kafka Connect worker (jars from Maven Central) with the sinks of topologies/connect/.",
    ),
    "cron": ("cron_cmd", "cron", "Cron expression tools."),
    "dev": (
        "dev_cmd",
        "dev",
        "Run broker, topics and every processor, supervised; Ctrl-C stops it all cleanly.",
    ),
    "dispatcher": (
        "processors_cmd",
        "dispatcher",
        "Run one dispatcher instance (identity from SCHEDULERSTREAM_INSTANCE_ID).",
    ),
    "jobs": ("jobs_cmd", "jobs", "Inspect and operate jobs of any tenant."),
    "kafka": (
        "kafka_cmd",
        "kafka",
        "Run a local single-node KRaft broker (jars from Maven Central).",
    ),
    "projector": (
        "projector_cmd",
        "projector",
        "Run one projector: the read model (SQLite in the data dir, or PostgreSQL when "
        "SCHEDULERSTREAM_DATABASE_URL is set) and the cron.run-state topic.",
    ),
    "receiver": (
        "receiver_cmd",
        "receiver",
        "A local webhook receiver: prints every delivery and checks its signature.",
    ),
    "runs": ("runs_cmd", "runs", "Inspect runs."),
    "scheduler": (
        "processors_cmd",
        "scheduler",
        "Run one scheduler instance (identity from SCHEDULERSTREAM_INSTANCE_ID).",
    ),
    "schedules": ("schedules_cmd", "schedules", "Create, replace and delete job definitions."),
    "tenants": ("tenants_cmd", "tenants", "Manage tenants and their API keys."),
    "topics": (
        "topics_cmd",
        "topics",
        "Create and verify the topics declared in topologies/topics.toml.",
    ),
    "worker": (
        "worker_cmd",
        "worker",
        "Run one worker of POOL (identity from SCHEDULERSTREAM_INSTANCE_ID).",
    ),
}


class _Group(click.Group):
    """Loads commands on first use and turns settings and broker errors of any command into a
    clear one-line error."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"schedulerstream.cli.{module}"), attribute)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing without importing every command (the help lines come from COMMANDS)."""
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                rows.append(
                    (name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit))
                )
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerStreamError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
@click.version_option(package_name="schedulerstream")
def main() -> None:
    """schedulerstream: a distributed cron scheduler on Apache Kafka."""

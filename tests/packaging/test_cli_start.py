"""The CLI starts fast: ``--help`` and ``cron next`` import none of the heavy libraries.

Commands load lazily (schedulerstream/cli/__init__.py); these tests run the real command in a
fresh interpreter with ``-X importtime`` and read which modules it imported.
"""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest

from schedulerstream.cli import COMMANDS, main

HEAVY = ("aiohttp", "fastapi", "confluent_kafka", "uvicorn", "rocksdict", "aiobotocore")


def imported_modules(*args: str) -> tuple[set[str], str]:
    """The top-level packages a ``schedulerstream ARGS`` process imports, and its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "schedulerstream", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    modules = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            modules.add(name.split(".")[0])
    return modules, result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("cron", "next", "0 9 * * *", "--tz", "Europe/Paris", "--count", "2"),
    ],
)
def test_fast_commands_import_no_heavy_library(args: tuple[str, ...]) -> None:
    modules, stdout = imported_modules(*args)
    assert stdout.strip()
    heavy = sorted(m for m in HEAVY if m in modules)
    assert not heavy, f"schedulerstream {' '.join(args)} imports {heavy}"


def test_cron_next_output() -> None:
    args = ("cron", "next", "0 9 * * *", "--tz", "Europe/Paris", "--count", "2")
    _, stdout = imported_modules(*args)
    assert "0 9 * * * in Europe/Paris" in stdout
    assert stdout.count("T09:00:00+0") == 2


def test_help_lines_match_the_commands() -> None:
    """The lazy listing's help lines are the commands' own (edit both together)."""
    ctx = click.Context(main)
    for name, (_, _, help_line) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == help_line, (
            f"COMMANDS[{name!r}] in schedulerstream/cli/__init__.py differs from the docstring"
        )

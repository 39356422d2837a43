"""Debian's Chromium for the console tests, driven by Playwright (never ``playwright install``).

Like harness/pg.py for PostgreSQL: when /usr/bin/chromium is missing and we are root on
Debian, the ``chromium`` package is installed with apt-get first (CI's fresh machine);
``SS_TEST_CHROMIUM`` names another executable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = Path(os.environ.get("SS_TEST_CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> Path:
    """The Chromium executable, installing Debian's package if needed."""
    if CHROMIUM.exists():
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
        check=True,
        env=env,
        capture_output=True,
    )
    if not CHROMIUM.exists():
        raise RuntimeError(f"apt-get installed chromium but {CHROMIUM} is missing")
    return CHROMIUM

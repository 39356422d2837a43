"""A real PostgreSQL server for the tests and the projector bench: Debian's binaries, a throw-away
cluster, a free port.

``SS_TEST_DATABASE_URL`` (a ``postgresql://`` URL of a database the tests may create databases
from) uses an existing server instead. Without either, and as root on Debian, the server
package is installed with apt-get first.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

PG_USER = "postgres"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def ensure_installed() -> Path:
    """The directory of initdb/pg_ctl, installing Debian's postgresql package if needed."""
    found = _bin_dir()
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError("PostgreSQL is not installed: apt-get install -y postgresql")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"],
        check=True,
        env=env,
        capture_output=True,
    )
    found = _bin_dir()
    if found is None:
        raise RuntimeError("apt-get installed postgresql but no initdb was found")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """initdb + pg_ctl start in a temporary directory; ``stop()`` removes it."""

    def __init__(self) -> None:
        self.bin = ensure_installed()
        self.dir = Path(tempfile.mkdtemp(prefix="ss-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:  # the server refuses to run as root
            entry = pwd.getpwnam(PG_USER)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.url = f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", PG_USER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed:\n{result.stdout}{result.stderr}")

    def start(self) -> PostgresServer:
        self._run("initdb", "-D", str(self.data), "-U", PG_USER, "--auth=trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-o", options,
            "-l", str(self.dir / "server.log"),
        )  # fmt: skip
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def create_database(admin_url: str) -> str:
    """A new empty database on the server of ``admin_url``; returns its URL."""
    name = f"ss_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def drop_database(admin_url: str, url: str) -> None:
    name = url.rpartition("/")[2]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

"""ElasticMQ, a real SQS-compatible server process for the SQS target tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.procs import stop_process

ELASTICMQ_VERSION = "1.6.16"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.schedulerstream</groupId><artifactId>elasticmq-runner</artifactId>
  <version>1</version>
  <dependencies><dependency>
    <groupId>org.elasticmq</groupId><artifactId>elasticmq-server_2.13</artifactId>
    <version>{version}</version>
  </dependency></dependencies>
</project>
"""
_CONF = """include classpath("application.conf")
node-address {{ protocol = http, host = "127.0.0.1", port = {port}, context-path = "" }}
rest-sqs {{ enabled = true, bind-port = {port}, bind-hostname = "127.0.0.1", sqs-limits = strict }}
rest-stats {{ enabled = false }}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ElasticMQ:
    """An ElasticMQ server (a real SQS-compatible process) on 127.0.0.1, fetched with Maven."""

    def __init__(self, work_dir: Path, cache_dir: Path | None = None) -> None:
        self.work_dir = work_dir
        base = cache_dir or Path.home() / ".cache" / "schedulerstream"
        self.cache_dir = base / f"elasticmq-{ELASTICMQ_VERSION}"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> str | None:
        """Why ElasticMQ cannot run here (no java or mvn), or None."""
        missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
        return f"needs {' and '.join(missing)} on PATH" if missing else None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def classpath(self) -> str:
        """The server's classpath, resolved by Maven once and cached."""
        cp_file = self.cache_dir / "classpath.txt"
        if cp_file.exists():
            classpath = cp_file.read_text().strip()
            if all(Path(p).exists() for p in classpath.split(os.pathsep)):
                return classpath
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        (self.cache_dir / "pom.xml").write_text(_POM.format(version=ELASTICMQ_VERSION))
        tmp = self.cache_dir / "classpath.tmp"
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={tmp}"],
            cwd=self.cache_dir,
            check=True,
            timeout=600,
        )
        tmp.replace(cp_file)
        return cp_file.read_text().strip()

    def start(self, timeout: float = 120.0) -> ElasticMQ:
        classpath = self.classpath()
        self.port = free_port()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "elasticmq.conf"
        conf.write_text(_CONF.format(port=self.port))
        log = (self.work_dir / "elasticmq.log").open("ab")
        main = "org.elasticmq.server.Main"
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", f"-Dconfig.file={conf}", "-cp", classpath, main],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ElasticMQ exited: {self.log()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/?Action=ListQueues", timeout=2).close()
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"ElasticMQ did not answer in {timeout:g} s: {self.log()[-2000:]}")

    def log(self) -> str:
        path = self.work_dir / "elasticmq.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)

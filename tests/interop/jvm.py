"""Run ``ProduceSchedules.java`` (JDK single-file source launch) with the Avro and Kafka jars.

Apache Avro's jars are fetched by Maven (``avro-pom.xml``) into
``{cache_dir}/avro-{AVRO_VERSION}/libs`` on first use, the way ``LocalBroker.jars_dir`` fetches
Kafka's, so a fresh machine needs only Java 17+ and Maven.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
AVRO_POM = HERE / "avro-pom.xml"
PRODUCER_SOURCE = HERE / "ProduceSchedules.java"
AVRO_VERSION = "1.12.0"


def avro_jars_dir(cache_dir: Path, version: str = AVRO_VERSION) -> Path:
    """A directory holding Apache Avro ``version`` and its dependencies (fetched if missing)."""
    cached = cache_dir / f"avro-{version}" / "libs"
    if (cached / f"avro-{version}.jar").exists():
        return cached
    if shutil.which("mvn") is None:
        raise RuntimeError("Maven (mvn) is not on PATH: it fetches Apache Avro for this test")
    partial = cached.with_name(f"libs.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    command = [
        "mvn", "-q", "-B", "-f", str(AVRO_POM), f"-Davro.version={version}",
        "dependency:copy-dependencies", f"-DoutputDirectory={partial}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0 or not (partial / f"avro-{version}.jar").exists():
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(
            f"mvn could not fetch Apache Avro {version}:\n{result.stdout}{result.stderr}"
        )
    if (cached / f"avro-{version}.jar").exists():  # another process got there first
        shutil.rmtree(partial, ignore_errors=True)
        return cached
    shutil.rmtree(cached, ignore_errors=True)
    partial.rename(cached)
    return cached


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` from PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH and JAVA_HOME is not set (Java 17+ needed)")
    return java


@dataclass(frozen=True)
class Produced:
    """One record the Java producer wrote, as its RecordMetadata reported it."""

    key: str
    partition: int
    offset: int
    value: bytes


class JavaProducer:
    """``ProduceSchedules.java`` as a process: started, ready (producer connected), then fed.

    Records are ``(kind, key, arg)`` triples (see the Java source); they are sent only once the
    JVM is up, so instants chosen after ``ready()`` are not eaten by its start-up.
    """

    def __init__(
        self, classpath: list[Path], bootstrap: str, topic: str, schema_dir: Path, log: Path
    ) -> None:
        command = [
            java_executable(),
            "-cp", os.pathsep.join(f"{jars}/*" for jars in classpath),
            str(PRODUCER_SOURCE), bootstrap, topic, str(schema_dir),
        ]  # fmt: skip
        self.log = log
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
            )

    def _failed(self, what: str) -> AssertionError:
        self.process.kill()
        self.process.wait(10)
        stderr = self.log.read_text(errors="replace")[-4000:]
        return AssertionError(f"the Java producer {what} ({self.process.returncode}):\n{stderr}")

    def ready(self) -> None:
        """Block until the producer has the topic's metadata (it gives up after 60 s itself)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise self._failed(f"did not get ready (printed {line!r})")

    def send(self, records: list[tuple[str, str, str]], timeout: float = 60) -> list[Produced]:
        """Send ``records``, wait for every ack, return what the client reported."""
        lines = "".join("\t".join(record) + "\n" for record in records)
        try:
            stdout, _ = self.process.communicate(lines, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise self._failed(f"did not finish in {timeout} s") from None
        if self.process.returncode != 0:
            raise self._failed("failed")
        produced = []
        for line in stdout.splitlines():
            key, partition, offset, value = line.split("\t")
            produced.append(Produced(key, int(partition), int(offset), bytes.fromhex(value)))
        assert len(produced) == len(records), stdout
        return produced

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

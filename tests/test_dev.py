"""`schedulerstream dev` brings up topics and the scheduler, reports readiness, stops on Ctrl-C;
as a dev convenience it creates the Kafka target topics jobs name and allows private targets,
saying so."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness.procs import settings_env
from schedulerstream.kafka import topics
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings
from tests.support.runs import read_runs

pytestmark = pytest.mark.kafka


def _put(env: dict[str, str], job: dict[str, object]) -> None:
    subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", "-"],
        input=json.dumps(job), env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip


def _job(job_id: str, topic: str) -> dict[str, object]:
    # the first run a few seconds on, after dev has created the topic (a run due sooner races
    # the creation: its first attempts may fail, retried by the dispatcher)
    start = datetime.now(UTC) + timedelta(seconds=4)
    schedule = {"every": 1, "start_at": start.isoformat()}
    return {"tenant": "dev", "job_id": job_id, "schedule": schedule, "max_runs": 2,
            "target": {"type": "kafka", "topic": topic}}  # fmt: skip


def _keys(settings: Settings, topic: str) -> list[str]:
    config = {"group.id": f"{topic}-check", "isolation.level": "read_committed"}
    consumer = Consumer({**base_config(settings), **config, "enable.auto.commit": False})
    try:
        info = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if info is None or info.error is not None:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in info.partitions])
        keys = []
        while batch := consumer.consume(100, timeout=1.0):
            keys += [m.key().decode() for m in batch if m.error() is None and m.key()]
        return keys
    finally:
        consumer.close()


def test_dev_runs_the_stack_and_stops_cleanly_on_ctrl_c(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    env = settings_env(kafka_settings)
    for name in ("SCHEDULERSTREAM_INSTANCE_ID", "SCHEDULERSTREAM_ALLOW_PRIVATE_TARGETS"):
        del env[name]  # as for a user who set neither: dev's own defaults apply
    prefix = kafka_settings.topic_prefix
    before, after = f"{prefix}before.out", f"{prefix}after.out"
    topics.apply(kafka_settings)
    _put(env, _job("before", before))  # a job dev finds when it starts
    log = tmp_path / "dev.log"
    with log.open("w") as out:  # a file, not a pipe nobody reads while the test waits
        dev = subprocess.Popen(
            # one dispatcher process on any machine (dev's default is half the cores)
            [sys.executable, "-m", "schedulerstream.cli", "dev", "--port", "0",
             "--dispatcher-processes", "1"],
            env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def text() -> str:
        return log.read_text(errors="replace")

    try:
        deadline = time.monotonic() + 120
        while not all(
            f"{c}: ready" in text() for c in ("scheduler", "dispatcher", "projector", "api")
        ):
            assert time.monotonic() < deadline and dev.poll() is None, text()
            time.sleep(0.1)
        assert "a broker already answers" in text()  # the session broker: dev uses it
        assert "topics: ready" in text()
        assert "dev only: webhooks may reach loopback and private addresses" in text()
        assert "dev only: the Kafka topic a job's target names is created when missing" in text()
        # one identity per data dir, kept across restarts, so a respawned processor fences the
        # transaction its predecessor left open
        assert re.search(r"processor=dispatcher instance=dev-\S+-[0-9a-f]{8} ", text()), text()
        _put(env, _job("after", after))  # a job written while dev runs
        deadline = time.monotonic() + 60
        while len(read_runs(kafka_settings, idle_timeout=1).triggered) < 4:
            assert time.monotonic() < deadline, "no runs from the dev stack"
        deadline = time.monotonic() + 60
        while len(_keys(kafka_settings, before)) < 2 or len(_keys(kafka_settings, after)) < 2:
            assert time.monotonic() < deadline, f"the runs did not reach their topics\n{text()}"
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(60)
        except subprocess.TimeoutExpired:
            dev.kill()
            raise
    assert dev.returncode == 0, text()
    assert "scheduler: stopped" in text() and "projector: stopped" in text()
    for topic, job in ((before, "dev/before"), (after, "dev/after")):
        assert f"created Kafka topic {topic!r} (1 partition) for job {job} (dev only)" in text()
    # the topics existed before the runs: no attempt failed, no transaction aborted
    assert not re.search(r"Unknown topic|UNKNOWN_TOPIC|_INCONSISTENT", text()), text()[-4000:]

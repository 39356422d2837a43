"""Against a real secured broker (SASL_SSL, SCRAM-SHA-512, StandardAuthorizer): the whole
pipeline with each component as its own principal holding only the ACLs of ``acls plan``; least
privilege; a missing ACL, a wrong password and an untrusted CA each stop a component at start
with a clear message, within seconds."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from harness.procs import ProcessorProcess, ReceiverProcess, settings_env
from schedulerstream.kafka import acls, topics
from schedulerstream.kafka.access import check_access
from schedulerstream.kafka.clients import base_config, consumer_config, producer_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.api.helpers import ApiProcess, auth
from tests.projector.kafka_helpers import ProjectorProcess
from tests.secure.conftest import SecureCluster, cli
from tests.targets.helpers import expected_signature
from tests.worker.support import WorkerProcess

pytestmark = pytest.mark.kafka

SECRET = "whsec_" + base64.b64encode(b"secured-cluster-test-key-0123456").decode()
QUICK_S = 10.0  # "within seconds": a start-up refusal, never a timeout


def _admin_env(cluster: SecureCluster, admin: Settings) -> dict[str, str]:
    return settings_env(admin)


def _apply_all(cluster: SecureCluster, admin: Settings) -> None:
    """``acls apply`` as the admin, for every component's default principal."""
    applied = cli(_admin_env(cluster, admin), "acls", "apply")
    assert applied.returncode == 0, applied.stderr
    assert "ACLs in place for 6 principals" in applied.stdout


def _start_refused(settings: Settings, component: str = "scheduler") -> tuple[str, float]:
    """Run ``component`` and expect it to stop at once: (stderr, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", component],
        env=settings_env(settings), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr, elapsed


def _wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def test_kafka_up_secure_prints_the_admin_properties_file(secure_cluster: SecureCluster) -> None:
    path = secure_cluster.admin_file
    assert path.is_absolute() and path.exists()
    assert path.stat().st_mode & 0o777 == 0o600
    again = cli(secure_cluster.env, "kafka", "up", "--secure")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(path)
    assert "already running" in again.stderr
    password = next(
        line.split("=", 1)[1] for line in path.read_text().splitlines() if "password" in line
    )
    assert password not in again.stdout + again.stderr
    status = cli({**secure_cluster.env, "SCHEDULERSTREAM_KAFKA_CONFIG_FILE": str(path)},
                 "kafka", "status")  # fmt: skip
    assert status.returncode == 0, status.stdout + status.stderr


def test_pipeline_with_every_component_as_its_own_principal(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path
) -> None:
    """put a job → run → signed webhook → read model → API, each component authenticating as
    its own SCRAM user over TLS with only the ACLs of ``acls plan``; then a worker pool, and a
    Kafka target the dispatcher may write once granted (``acls apply --target-topic``)."""
    admin = secure_cluster.settings(prefix, tmp_path)
    topics.apply(admin)
    _apply_all(secure_cluster, admin)
    key = TenantAdmin(admin).create("acme")[1]

    def as_user(user: str) -> Settings:
        return secure_cluster.settings(prefix, tmp_path, user)

    receiver = ReceiverProcess().start()
    worker: WorkerProcess | None = None
    procs: list[ProcessorProcess] = [
        ProcessorProcess(as_user("scheduler"), "scheduler", "s1", tmp_path),
        ProcessorProcess(
            as_user("dispatcher"), "dispatcher", "d1", tmp_path, allow_private_targets=True
        ),
        ProjectorProcess(as_user("projector"), "p1", tmp_path),
        ApiProcess(as_user("api"), tmp_path, data_dir=tmp_path / "p1"),  # the projector's model
    ]
    api = procs[-1]
    assert isinstance(api, ApiProcess)
    exits: dict[str, int] = {}
    try:
        for proc in procs:
            proc.start()
        api.wait_ready()
        for proc in procs[:-1]:
            proc.wait_for_log("running: restored", count=2)  # every task running

        def put_soon(job_id: str, target: dict[str, Any], payload: Any = None) -> None:
            at = datetime.now(UTC) + timedelta(seconds=2)  # fired by the scheduler's own timer
            body = {"schedule": {"at": at.isoformat()}, "target": target, "payload": payload}
            answer = httpx.put(f"{api.url}/v1/jobs/{job_id}", json=body, headers=auth(key),
                               timeout=10)  # fmt: skip
            assert answer.status_code == 200, answer.text

        def runs_of(job_id: str) -> list[dict[str, Any]]:
            answer = httpx.get(f"{api.url}/v1/jobs/{job_id}/runs", headers=auth(key), timeout=10)
            return list(answer.json()["items"]) if answer.status_code == 200 else []

        def succeeded(job_id: str) -> bool:
            return [run["status"] for run in runs_of(job_id)] == ["succeeded"]

        # a signed webhook
        target = {"type": "http", "url": receiver.url("/ok"), "secret": SECRET}
        put_soon("nightly", target, {"secured": True})
        request = _wait(lambda: receiver.requests(), 60, "the webhook")[0]
        headers, sent = request["headers"], base64.b64decode(request["body_b64"])
        assert headers["webhook-signature"] == expected_signature(
            SECRET, headers["webhook-id"], headers["webhook-timestamp"], sent
        )
        assert json.loads(sent)["payload"] == {"secured": True}
        _wait(lambda: succeeded("nightly"), 60, "the run succeeded in the read model, via the API")

        # a worker pool: the dispatcher creates work.email, a worker as User:worker runs it
        worker = WorkerProcess(as_user("worker"), "w1", tmp_path, pool="email").start()
        put_soon("mailer", {"type": "worker", "pool": "email"}, {})
        _wait(lambda: succeeded("mailer"), 60, "the worker's run succeeded")
        assert worker.stop() == 0, worker.log()[-3000:]

        # a Kafka target: refused until the dispatcher is granted Write on it (acls apply)
        out = f"{prefix}exports"
        admin_client = AdminClient(base_config(admin))
        admin_client.create_topics([NewTopic(out, 1, 1)])[out].result(10)
        put_soon("exporter", {"type": "kafka", "topic": out}, {"n": 1})

        def refused() -> bool:
            runs = runs_of("exporter")
            if not runs:
                return False
            detail = httpx.get(f"{api.url}/v1/runs/{runs[0]['run_id']}", headers=auth(key),
                               timeout=10).json()  # fmt: skip
            return any(out in (a["reason"] or "") for a in detail["attempts"])

        _wait(refused, 60, "an attempt refused, naming the target topic")
        granted = cli(settings_env(admin), "acls", "apply", "--component", "dispatcher",
                      "--target-topic", out)  # fmt: skip
        assert granted.returncode == 0, granted.stderr
        _wait(lambda: succeeded("exporter"), 90, "the retry after the grant succeeded")
        [record] = list(read_topic(admin, out, idle_timeout=1.0))
        assert json.loads(record.value())["payload"] == {"n": 1}

        # a scheduler with an empty store restores its changelog (no group ACL for that)
        assert procs[0].stop() == 0, procs[0].log()[-3000:]
        procs[0] = ProcessorProcess(as_user("scheduler"), "scheduler", "s2", tmp_path,
                                    data_dir=tmp_path / "s2")  # fmt: skip
        procs[0].start().wait_for_log("running: restored", count=2)
        assert re.search(r"running: restored [1-9]\d* records \(cold\)", procs[0].log())
        for proc in procs:
            assert proc.alive(), proc.log()[-3000:]
            assert "uthentication failed" not in proc.log(), proc.log()[-3000:]
    finally:
        for proc in reversed(procs):
            if proc.alive():
                exits[proc.component] = proc.stop()
        if worker is not None and worker.process is not None and worker.process.poll() is None:
            worker.stop()
        receiver.stop()
    assert set(exits.values()) == {0}, exits  # each stopped cleanly on SIGTERM


def test_a_worker_principal_cannot_read_schedules(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path
) -> None:
    admin = secure_cluster.settings(prefix, tmp_path)
    topics.apply(admin)
    acls.apply(admin, acls.plan(admin, {"worker": "User:worker"}, pools=["email"]))
    producer = Producer(producer_config(admin))
    producer.produce(admin.topic("schedules"), key=b"acme/j1", value=b"{}", partition=0)
    assert producer.flush(10) == 0
    worker = secure_cluster.settings(prefix, tmp_path, "worker")
    check_access(worker, "worker", pools=["email"])  # it has what it needs

    # its own group, which it may use (a group-less assign() is refused as silently)
    consumer = Consumer(consumer_config(worker, f"{prefix}work.email"))
    consumer.subscribe([admin.topic("schedules")])
    try:
        deadline = time.monotonic() + QUICK_S
        error = None
        while error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is not None, "the worker read a schedule"
                error = message.error()
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_a_component_missing_one_acl_stops_at_start_naming_it(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path
) -> None:
    admin = secure_cluster.settings(prefix, tmp_path)
    topics.apply(admin)
    grants = acls.plan(admin, {"scheduler": "User:scheduler"})
    left_out = [g for g in grants if g.need.name == f"{prefix}runs" and g.need.operation == "Write"]
    assert len(left_out) == 1
    acls.apply(admin, [g for g in grants if g not in left_out])
    stderr, elapsed = _start_refused(secure_cluster.settings(prefix, tmp_path, "scheduler"))
    assert elapsed < QUICK_S
    assert "principal User:scheduler" in stderr
    assert f"  - Write on Topic {prefix}runs\n" in stderr
    assert stderr.count("  - ") == 1, stderr


def _with(properties: Path, tmp_path: Path, name: str, value: str) -> Path:
    """A copy of ``properties`` with one property changed."""
    lines = [
        f"{name}={value}" if line.startswith(f"{name}=") else line
        for line in properties.read_text().splitlines()
    ]
    changed = tmp_path / f"changed-{name}.properties"
    changed.write_text("\n".join(lines) + "\n")
    return changed


@pytest.mark.parametrize("component", ["scheduler", "dispatcher", "projector", "api"])
def test_a_wrong_password_is_a_clear_error_within_seconds(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path, component: str
) -> None:
    settings = secure_cluster.settings(prefix, tmp_path, component)
    wrong = _with(secure_cluster.client_file(component), tmp_path, "sasl.password", "Wr0ng")
    stderr, elapsed = _start_refused(
        settings.model_copy(update={"kafka_config_file": wrong}), component
    )
    assert elapsed < QUICK_S
    assert f"cannot connect to {secure_cluster.bootstrap} as User:{component}" in stderr
    assert "authentication failed" in stderr and "invalid credentials" in stderr
    assert "Wr0ng" not in stderr


def test_an_untrusted_certificate_is_a_clear_error_within_seconds(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other_ca), "-subj", "/CN=other"],
        capture_output=True, check=True,
    )  # fmt: skip
    untrusted = _with(
        secure_cluster.client_file("scheduler"), tmp_path, "ssl.ca.location", str(other_ca)
    )
    scheduler = secure_cluster.settings(prefix, tmp_path, "scheduler")
    stderr, elapsed = _start_refused(scheduler.model_copy(update={"kafka_config_file": untrusted}))
    assert elapsed < QUICK_S
    assert f"cannot connect to {secure_cluster.bootstrap} as User:scheduler" in stderr
    assert "TLS handshake failed" in stderr and "certificate verify failed" in stderr
